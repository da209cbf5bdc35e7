"""One cold process's work before its first step, for scripts/bench_process_start.py."""

from __future__ import annotations

import time

import torch

from lmstudy.measure.devices import initialize_device, resolve_device
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import synchronize
from lmstudy.model_choice import ModelChoice


def cold_start(spec: dict) -> dict:
    """CUDA initialisation and the model build (with its optimizer), timed apart."""
    start = time.perf_counter()
    device = resolve_device(spec["device"])
    initialize_device(device)
    cuda_init_s = time.perf_counter() - start
    # the built-in model, as scripts/bench_process_start.py (a benchmark run by hand) sets it
    model = ModelSpec(size="bench", context_length=512, batch_size=4, vocab_size=10000, precision="fp32",
                      tf32=False, memory_cap_gb=None, model=ModelChoice(),
                      **{k: spec[k] for k in ("d_model", "d_ff", "num_layers", "num_heads", "device")})
    start = time.perf_counter()
    work = model.build_workload(device)
    synchronize(device)
    build_s = time.perf_counter() - start
    del work
    torch.cuda.empty_cache() if device.type == "cuda" else None
    return {"cuda_init_s": cuda_init_s, "build_s": build_s}
