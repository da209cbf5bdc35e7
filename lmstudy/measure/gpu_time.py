"""GPU time per step by kernel category, from a torch.profiler trace of a few steps.

The ladder splits each rung's step by category; the timing section uses the
sum (the GPU's busy time) to tell a GPU-bound step from a host-bound one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from lmstudy.analyse.nsys.categories import CATEGORIES, categorize
from lmstudy.analyse.nsys.torch_trace import read_events
from lmstudy.measure.device_clock import synchronize
from lmstudy.measure.nsys.capture import torch_profiler_capture

TOP_KERNELS = 8


def kernel_breakdown(step, device: torch.device, steps: int) -> dict[str, float]:
    """GPU time per step by kernel category (CPU operators on a CPU), in ms.

    `gpu_busy_ms` is their sum; the step's median time less it is when the
    GPU waited for the host.
    """
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        with torch_profiler_capture(device, trace):
            for _ in range(steps):
                step()
            synchronize(device)  # not a timer: the steps' kernels all run inside the capture
        activities = read_events(trace).activities
    ms = (activities["end"] - activities["start"]) / 1e6 / steps
    categories = [categorize(n, k) for n, k in zip(activities["name"], activities["kind"], strict=True)]
    per_category = ms.groupby(categories).sum()
    # Every category, 0 where none ran: each rung's row has the same columns.
    breakdown = {f"gpu_ms_{category}": float(per_category.get(category, 0.0)) for category in CATEGORIES}
    breakdown["gpu_busy_ms"] = float(ms.sum())
    # Launched kernels (copies and sets aside), exact: a count the host's noise cannot move.
    kernels = int((activities["kind"] == "kernel").sum()) if "kind" in activities else 0
    breakdown["kernels_per_step"] = kernels / steps if device.type == "cuda" else None
    top = ms.groupby(activities["name"].to_numpy()).sum().nlargest(TOP_KERNELS)
    breakdown["top_kernels"] = "; ".join(f"{name[:120]}: {value:.2f} ms" for name, value in top.items())
    return breakdown


# The activities a GPU step's busy time sums, as the profiler names their kinds (the Chrome trace's
# "cat", lmstudy.analyse.nsys.torch_trace): kernels, copies and sets; kernels_per_step counts the first.
GPU_ACTIVITIES = ("kernel", "gpu_memcpy", "gpu_memset")


def activity_totals(events, kinds: tuple[str, ...] = GPU_ACTIVITIES) -> tuple[float, int] | None:
    """(ms summed over the events of `kinds`, how many of them are the first kind) from the profiler's
    own events (`prof.profiler.kineto_results.events()`): the numbers its Chrome trace holds, read
    without writing and parsing that trace. None where this PyTorch's events do not say their kind."""
    total_ns, first = 0, 0
    for event in events:
        if not hasattr(event, "activity_type") or not hasattr(event, "duration_ns"):
            return None
        kind = event.activity_type()
        if kind in kinds:
            total_ns += event.duration_ns()
            first += kind == kinds[0]
    return total_ns / 1e6, first


def gpu_measures(step, device: torch.device) -> dict:
    """The GPU's busy time and the kernels launched in one more step (profiled after the timed window,
    which it cannot disturb): two of the three measures every measuring process records. None on a CPU.

    The same sums as kernel_breakdown's (every kernel, copy and set of the step, each once), from a
    profiler that records GPU activity only (no CPU operators: the step's host work is not what this
    measures) and read from its events in memory, not through a trace file: the per-process profile
    costs the measuring job less. Where this PyTorch's events do not name their kind, the trace path.
    """
    if device.type != "cuda":
        return {"gpu_busy_ms": None, "kernels_per_step": None}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        synchronize(device)  # not a timer: the step's kernels all run inside the capture
    totals = activity_totals(prof.profiler.kineto_results.events())
    if totals is None:
        breakdown = kernel_breakdown(step, device, 1)
        return {"gpu_busy_ms": breakdown["gpu_busy_ms"], "kernels_per_step": breakdown["kernels_per_step"]}
    busy_ms, kernels = totals
    return {"gpu_busy_ms": busy_ms, "kernels_per_step": float(kernels)}
