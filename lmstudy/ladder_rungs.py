"""The rungs of the training-step ladder benchmark (lmstudy.measure.ladder_bench), by key.

Torch-free, so that scripts/bench_ladder.py offers them before importing torch.

Rungs beyond the study's four:
- fused AdamW: one kernel for the whole optimizer step instead of a loop
  over tensors;
- torch.compile's max-autotune-no-cudagraphs mode: GEMM and fusion
  autotuning, slow to compile;
- CUDA graphs (compile mode reduce-overhead): the compiled forward and
  backward replay without per-kernel launches;
- one SDPA backend forced (flash or cuDNN), to compare them;
- compiled AdamW: inductor generates the optimizer step too; on an H200 it
  streams the 2.7B model's parameters and moments faster than the fused
  kernel (22 vs 28 ms per step);
- bf16 matrix weights beside fp32 masters (lmstudy.measure.master_weights): the
  compiled AdamW step updates the fp32 master and writes the bf16 weight in
  one kernel, so autocast no longer casts every weight on every use and the
  backward no longer casts every gradient back (on an H200 those casts were
  26 ms of the best rung's 183).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Rung:
    name: str
    precision: str
    attention: str
    compile_mode: str | None = None  # None: eager; "default", "max-autotune-no-cudagraphs", ...
    fused_adamw: bool = False
    # None: PyTorch's choice; else the only SDPA backend allowed (ladder_bench.SDPA_BACKENDS).
    sdpa_backend: str | None = None
    compile_optimizer: bool = False  # the optimizer step compiled by inductor too
    # bf16 Linear weights updated beside fp32 masters by a compiled AdamW (lmstudy.measure.master_weights).
    master_weights: bool = False


RUNGS = {
    "fp32": Rung("fp32", "fp32", "naive"),
    "bf16": Rung("bf16", "bf16", "naive"),
    "bf16-sdpa": Rung("bf16 + SDPA", "bf16", "sdpa"),
    "bf16-sdpa-compile": Rung("bf16 + SDPA + compile", "bf16", "sdpa", "default"),
    "bf16-sdpa-compile-fused": Rung(
        "bf16 + SDPA + compile + fused AdamW", "bf16", "sdpa", "default", fused_adamw=True
    ),
    "bf16-sdpa-autotune-fused": Rung(
        "bf16 + SDPA + compile max-autotune + fused AdamW",
        "bf16",
        "sdpa",
        "max-autotune-no-cudagraphs",
        fused_adamw=True,
    ),
    "bf16-sdpa-cudagraphs-fused": Rung(
        "bf16 + SDPA + compile with CUDA graphs + fused AdamW",
        "bf16",
        "sdpa",
        "reduce-overhead",
        fused_adamw=True,
    ),
    "bf16-sdpa-cudagraphs-fused-flash": Rung(
        "bf16 + SDPA (flash) + compile with CUDA graphs + fused AdamW",
        "bf16",
        "sdpa",
        "reduce-overhead",
        fused_adamw=True,
        sdpa_backend="flash",
    ),
    "bf16-sdpa-cudagraphs-fused-cudnn": Rung(
        "bf16 + SDPA (cuDNN) + compile with CUDA graphs + fused AdamW",
        "bf16",
        "sdpa",
        "reduce-overhead",
        fused_adamw=True,
        sdpa_backend="cudnn",
    ),
    "bf16-sdpa-cudagraphs-compiled-adamw": Rung(
        "bf16 + SDPA + compile with CUDA graphs + compiled AdamW",
        "bf16",
        "sdpa",
        "reduce-overhead",
        compile_optimizer=True,
    ),
    "bf16-sdpa-master": Rung(
        "bf16 + SDPA + bf16 weights with fp32 masters", "bf16", "sdpa", master_weights=True
    ),
    "bf16-sdpa-compile-master": Rung(
        "bf16 + SDPA + compile + bf16 weights with fp32 masters",
        "bf16",
        "sdpa",
        "default",
        master_weights=True,
    ),
    "bf16-sdpa-cudagraphs-master": Rung(
        "bf16 + SDPA + compile with CUDA graphs + bf16 weights with fp32 masters",
        "bf16",
        "sdpa",
        "reduce-overhead",
        master_weights=True,
    ),
}

# The study's four rungs, then the best of the rest on an H200 (the README has the numbers).
DEFAULT_RUNGS = (
    "fp32",
    "bf16",
    "bf16-sdpa",
    "bf16-sdpa-compile",
    "bf16-sdpa-compile-fused",
    "bf16-sdpa-cudagraphs-compiled-adamw",
    "bf16-sdpa-cudagraphs-master",
)
