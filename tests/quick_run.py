"""Rows shaped like the quick preset's on an H200 (run qa at commit 3328963, as the review of its report
recomputed them: /work/shared/reviews/quick-report-h200.md), for the report side's tests.

Each timing row is what aggregate writes: the median over two processes with its interval, the
spread, the GPU's busy time per step and the flags at noise.min_gpu_busy 0.85 and max_spread 0.05.
Where the review gives no number the value is one a run like it gives; the tests read only what
they compute from these rows, never these numbers themselves.
"""

from __future__ import annotations

import json

import pandas as pd

from lmstudy.analyse.trust import flag_rows

MIN_GPU_BUSY, MAX_SPREAD = 0.85, 0.05

# (size, context, pass, precision): median ms, (interval), spread, GPU busy ms per process
TIMING = {
    ("small", 128, "forward", "fp32"): (15.2, (10.1, 20.3), 0.12, (4.62, 4.63)),
    ("small", 128, "forward", "bf16"): (16.0, (11.0, 21.0), 0.14, (2.02, 2.02)),
    ("small", 128, "forward_backward", "fp32"): (40.1, (30.5, 49.7), 0.09, (14.0, 14.02)),
    ("small", 128, "forward_backward", "bf16"): (44.0, (35.2, 52.8), 0.08, (5.81, 5.82)),
    ("small", 128, "train_step", "fp32"): (55.3, (44.0, 66.6), 0.08, (16.8, 16.81)),
    ("small", 128, "train_step", "bf16"): (60.2, (48.1, 72.3), 0.09, (8.62, 8.62)),
    ("small", 256, "forward", "fp32"): (21.7, (13.6, 28.9), 0.35, (8.60, 8.61)),
    ("small", 256, "forward", "bf16"): (19.1, (12.8, 25.4), 0.21, (2.81, 2.81)),
    ("small", 256, "forward_backward", "fp32"): (66.6, (51.2, 86.5), 0.042, (25.7, 25.72)),
    ("small", 256, "forward_backward", "bf16"): (58.0, (44.3, 71.7), 0.11, (7.91, 7.91)),
    ("small", 256, "train_step", "fp32"): (66.4, (55.8, 77.0), 0.07, (28.52, 28.53)),
    ("small", 256, "train_step", "bf16"): (68.8, (60.6, 79.8), 0.06, (10.74, 10.74)),
    ("2.7B", 256, "forward", "fp32"): (167.0, (163.2, 170.8), 0.004, (164.9, 165.0)),
    ("2.7B", 256, "forward", "bf16"): (48.7, (40.1, 57.3), 0.05, (25.73, 25.74)),
    ("2.7B", 256, "forward_backward", "fp32"): (502.0, (500.0, 504.0), 0.002, (493.0, 493.2)),
    ("2.7B", 256, "forward_backward", "bf16"): (133.0, (109.0, 161.0), 0.03, (75.7, 75.8)),
    ("2.7B", 256, "train_step", "fp32"): (576.5, (575.0, 578.0), 0.002, (564.8, 565.0)),
    ("2.7B", 256, "train_step", "bf16"): (218.3, (196.0, 243.0), 0.017, (147.8, 147.9)),
}
PARAMS = {"small": 128_625_408, "2.7B": 3_406_809_600}
DIMS = {"small": (768, 3072, 12, 12), "2.7B": (2560, 10240, 32, 32)}


def _trajectory(median: float, first: float, second: float, early: float) -> list[list[float]]:
    """Two processes' 15 steps: a cold first step, a second, three more `early` off steady, ten steady."""
    steps = [median * first, median * second] + [median * early] * 3 + [median] * 10
    return [steps, [s * 1.01 for s in steps]]


def timing(*, gpu_busy_processes: bool = True) -> pd.DataFrame:
    """Steady rows (warm-up 5) and their warm-up 0 and 1 windows, flagged as aggregate flags them.

    Host-bound cells start 5.1% off in their second step; GPU-bound cells (2.7B fp32) are steady from
    their second step on: steps 2 to 5 within 0.2% of steps 6 to 15."""
    rows = []
    for (size, ctx, pass_name, precision), (median, (low, high), spread, busy) in TIMING.items():
        bound = sum(busy) / len(busy) / median >= MIN_GPU_BUSY
        second, early = (1.001, 1.002) if bound else (1.051, 1.04)
        d_model, d_ff, layers, heads = DIMS[size]
        for warmup in (0, 1, 5):
            row = {
                "size": size, "context_length": ctx, "pass": pass_name, "precision": precision,
                "variant": "naive", "warmup_steps": warmup, "timed_steps": 10, "status": "ok",
                "batch_size": 4, "vocab_size": 10000, "d_model": d_model, "d_ff": d_ff,
                "num_layers": layers, "num_heads": heads, "params": PARAMS[size],
                "median_ms": median if warmup == 5 else median * (1.3 if warmup == 0 else 1.01),
                "mean_ms": median * (1.76 if warmup == 0 else 1.0), "std_ms": median * 0.1,
                "cv": 0.15 if not bound else 0.003, "first_step_ms": median * 8.6,
                "processes": 2, "process_spread": spread, "ci_low_ms": low, "ci_high_ms": high,
                "gpu_busy_ms": busy[0], "gpu_busy_share": busy[0] / median,
                "trajectory_ms": json.dumps(_trajectory(median, 8.6, second, early)),
                "gpu": "NVIDIA H200", "tokens_per_s": 4 * ctx / median * 1e3, "achieved_tflops": float("nan"),
                "mfu": float("nan"), "peak_allocated_bytes": float("nan"),
            }
            if gpu_busy_processes:
                row["gpu_busy_ms_processes"] = json.dumps(list(busy))
            rows.append(row)
    frame = flag_rows(pd.DataFrame(rows), MIN_GPU_BUSY, MAX_SPREAD)
    frame["size"] = pd.Categorical(frame["size"], categories=["small", "2.7B"], ordered=True)
    frame["pass"] = pd.Categorical(frame["pass"], categories=["forward", "forward_backward", "train_step"],
                                   ordered=True)
    return frame


def compile_rows(*, gpu_busy: bool = False) -> pd.DataFrame:
    """The compile section's small ctx 256 bf16 training step, eager and compiled (4 processes each)."""
    rows = []
    for mode, median, low, high, excess, busy in (("eager", 54.78, 49.6, 59.7, 0.5, 10.7),
                                                  ("compiled", 29.25, 27.1, 31.4, 33.1, 7.9)):
        row = {"size": "small", "context_length": 256, "batch_size": 4, "precision": "bf16",
               "attention": "naive", "mode": mode, "pass": "train_step", "warmup_steps": 3,
               "timed_steps": 10, "status": "ok", "median_ms": median, "ci_low_ms": low, "ci_high_ms": high,
               "processes": 4, "first_step_excess_s": excess, "gpu_index": 0}
        if gpu_busy:
            row["gpu_busy_ms"] = busy
        rows.append(row)
    return pd.DataFrame(rows)


def ladder_rows() -> pd.DataFrame:
    """The ladder of small at ctx 256 (section 7), with each rung's GPU busy time, flagged as the
    aggregate flags it."""
    rungs = (("fp32", "fp32", "fp32", "naive", "", 60.18, 57.6, 62.8, 28.52),
             ("bf16", "bf16", "bf16", "naive", "", 68.2, 63.5, 71.9, 10.74),
             ("bf16-sdpa", "bf16 + SDPA", "bf16", "sdpa", "", 47.7, 35.9, 66.6, 9.48),
             ("bf16-sdpa-cudagraphs-master", "bf16 + SDPA + CUDA graphs", "bf16", "sdpa", "default",
              18.225, 17.9, 18.6, 4.08))
    return pd.DataFrame([
        {"size": "small", "rung_key": key, "rung": rung, "precision": precision, "attention": attention,
         "compile_mode": mode, "context_length": 256, "batch_size": 4, "status": "ok", "median_ms": median,
         "ci_low_ms": low, "ci_high_ms": high, "processes": 2, "gpu_busy_ms": busy, "cv": 0.05,
         "flops_per_step": 7.7196e11, "achieved_tflops": 7.7196e11 / median / 1e9,
         "gpu": "NVIDIA H200", "gpu_index": 1, "tf32_matmul": False, "matmul_tflops": 685.9,
         "share_of_matmul": 7.7196e11 / median / 1e9 / 685.9}
        for key, rung, precision, attention, mode, median, low, high, busy in rungs]).pipe(
        flag_rows, MIN_GPU_BUSY, MAX_SPREAD)


REPO = __import__("pathlib").Path(__file__).resolve().parent.parent
