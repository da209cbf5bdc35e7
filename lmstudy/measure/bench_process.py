"""One cold process's work before its first step, for scripts/bench_process_start.py."""

from __future__ import annotations

import torch

from lmstudy.measure.device_clock import now
from lmstudy.measure.devices import initialize_device, resolve_device
from lmstudy.measure.spec import ModelSpec
from lmstudy.model_choice import ModelChoice


def cold_start(spec: dict) -> dict:
    """CUDA initialisation and the model build (with its optimizer), timed apart."""
    start = now(None)  # no device yet: starting it is what this region times
    device = resolve_device(spec["device"])
    initialize_device(device)
    cuda_init_s = now(device) - start
    # the built-in model, as scripts/bench_process_start.py (a benchmark run by hand) sets it
    model = ModelSpec(size="bench", context_length=512, batch_size=4, vocab_size=10000, precision="fp32",
                      tf32=False, memory_cap_gb=None, model=ModelChoice(),
                      **{k: spec[k] for k in ("d_model", "d_ff", "num_layers", "num_heads", "device")})
    start = now(device)
    work = model.build_workload(device)
    build_s = now(device) - start
    del work
    torch.cuda.empty_cache() if device.type == "cuda" else None
    return {"cuda_init_s": cuda_init_s, "build_s": build_s}
