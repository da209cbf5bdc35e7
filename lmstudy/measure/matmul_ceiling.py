"""The dense bf16 matmul ceiling of the GPU a job runs on: the ladder's measured reference (section 7).

A ceiling must be a rate the GPU sustains at its steady clocks, not one
product timed alone: a single product carries its launch and the ramp of an
idling GPU's clock, and a sync after each lets the clock fall between them.
So, for each size n: first ~`warmup_s` seconds of products (clocks and
power settle, cuBLAS picks its kernel), then `bursts` bursts, each of
`burst_products` products issued back to back (no sync between them) and
timed as a whole by CUDA events around the burst. The highest burst rate is
the ceiling (the median is kept beside it, to show how steady it was). The
SM clock and power are sampled by NVML *during* the bursts
(lmstudy.measure.gpu_monitor.ClockSampler), not read after them.

Each ladder rung job measures it on its own GPU right after its rung, in the
same process (lmstudy.measure.ladder_bench, scripts/ladder_rung.py): which GPU a
rung gets is known only when its job leases one, and ceilings differ from
one GPU of a model to the next by a few percent, so a rung's share is of
its own GPU's ceiling. It costs a few seconds per rung.

On a CPU it measures the CPU's rate (perf_counter around each burst; the
clock columns stay empty).
"""

from __future__ import annotations

import statistics
import time

import torch

from lmstudy.measure.gpu_monitor import ClockSampler


def _products(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, count: int) -> None:
    for _ in range(count):
        torch.matmul(a, b, out=out)


def _burst_seconds(a, b, out, products: int, device: torch.device) -> float:
    """Seconds for `products` back-to-back products, timed as one burst."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        _products(a, b, out, products)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    started = time.perf_counter()
    _products(a, b, out, products)
    return time.perf_counter() - started


def _warm_up(a, b, out, seconds: float, device: torch.device) -> None:
    """Products back to back for at least `seconds` (at least one), synchronizing every few."""
    started = time.perf_counter()
    while True:
        _products(a, b, out, 4)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if time.perf_counter() - started >= seconds:
            return


def measure_ceiling(
    sizes: list[int], warmup_s: float, bursts: int, burst_products: int, device: torch.device
) -> list[dict]:
    """One row per burst: n, burst, products, burst_ms, tflops, and the clocks sampled during that size's
    bursts (gpu_monitor.COLUMNS; empty off NVIDIA)."""
    rows = []
    for n in sizes:
        generator = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=generator)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=generator)
        out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        _warm_up(a, b, out, warmup_s, device)
        with ClockSampler() as sampler:
            seconds = [_burst_seconds(a, b, out, burst_products, device) for _ in range(bursts)]
        for i, s in enumerate(seconds):
            rows.append(
                {
                    "n": n,
                    "burst": i,
                    "products": burst_products,
                    "burst_ms": s * 1e3,
                    "tflops": 2 * n**3 * burst_products / s / 1e12,
                    **sampler.result,
                }
            )
        del a, b, out
    return rows


def summarize(rows: list[dict]) -> dict:
    """The ceiling (highest burst rate) and the median burst at that n, for a log line."""
    best = max(rows, key=lambda r: r["tflops"])
    at_n = [r["tflops"] for r in rows if r["n"] == best["n"]]
    return {"n": best["n"], "ceiling_tflops": best["tflops"], "median_tflops": statistics.median(at_n)}
