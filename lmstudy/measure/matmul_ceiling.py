"""The dense bf16 matmul ceiling of the GPU a job runs on: the ladder's measured reference (section 7).

A ceiling must be a rate the GPU sustains at its steady clocks, not one
product timed alone: a single product carries its launch and the ramp of an
idling GPU's clock, and a sync after each lets the clock fall between them.
So, for each size n: first ~`warmup_s` seconds of products (clocks and
power settle, cuBLAS picks its kernel), then bursts of `burst_products`
products issued back to back (no sync between them), each timed as a whole
by CUDA events, until the rate stops rising: the last `bursts` bursts lie
within SETTLED of each other (on an H200 a fixed five bursts were still
rising, 566 to 653 TFLOP/s, so the last of them was no ceiling), or
`bursts` × MAX_BURSTS_FACTOR bursts have run (then the rows say it never
settled). The ceiling is the median of that last window (kind
"sustained", steady True).

Beside it, the rate a short benchmark sees: `bursts` single products, each
after a pause with the device idle (kind "short"): the figure people quote
for a GPU, reached at the clock an idle GPU boosts to. The report shows
both beside the datasheet's peak, each named for what it is.

The SM clock and power are sampled by NVML *during* the bursts
(lmstudy.measure.gpu_monitor.ClockSampler) and summarized per burst over
that burst's own time, so a clock stands beside the rate it was read with
(a window over many bursts mixes the ramp with the plateau). NVML's power
is its own running average, about a second long.

Each ladder rung job measures it on its own GPU right after its rung, in the
same process (lmstudy.measure.ladder_bench, lmstudy measure ladder): which GPU a
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

from lmstudy import rates
from lmstudy.analyse.ladder_table import SETTLED_WITHIN
from lmstudy.flops import matmul_flops
from lmstudy.measure.device_clock import now
from lmstudy.measure.gpu_monitor import COLUMNS, ClockSampler


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
    started = now(device)
    _products(a, b, out, products)
    return now(device) - started


def _warm_up(a, b, out, seconds: float, device: torch.device) -> None:
    """Products back to back for at least `seconds` (at least one), synchronizing every few."""
    started = now(device)
    while True:
        _products(a, b, out, 4)
        if now(device) - started >= seconds:
            return


# The rate has stopped rising when the last `bursts` bursts lie within SETTLED of each other (max/min - 1);
# the report words it from the same value.
SETTLED = SETTLED_WITHIN
# At most this many times `bursts` sustained bursts per size: a GPU whose rate never settles (thermal
# cycling, another process) ends with rows that say so rather than running on.
MAX_BURSTS_FACTOR = 10
# The idle pause before each short burst: long enough for the queue to drain, short enough that the
# clock stays boosted.
SHORT_PAUSE_S = 0.05


def settled(tflops: list[float], window: int, within: float = SETTLED) -> bool:
    """Whether the last `window` rates lie within `within` of each other: the rate has stopped rising."""
    last = tflops[-window:]
    return len(last) >= window and min(last) > 0 and max(last) / min(last) - 1 <= within


def _timed(sampler, a, b, out, products: int, device) -> tuple[float, dict]:
    """One burst's seconds and the clocks sampled during it."""
    started = now(device)
    seconds = _burst_seconds(a, b, out, products, device)
    return seconds, sampler.window(started, now(device))


def measure_ceiling(
    sizes: list[int], warmup_s: float, bursts: int, burst_products: int, device: torch.device
) -> list[dict]:
    """One row per burst: n, kind (short or sustained), burst, products, burst_ms, tflops, steady (the
    sustained bursts of the final window, where the rate had stopped rising; settled says whether it
    did), and the clocks sampled during that burst (gpu_monitor.COLUMNS; empty off NVIDIA)."""
    rows = []
    for n in sizes:
        generator = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=generator)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=generator)
        out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        _warm_up(a, b, out, warmup_s, device)
        window = max(1, bursts)
        with ClockSampler() as sampler:
            sustained, burst_rates = [], []
            while len(sustained) < window * MAX_BURSTS_FACTOR:
                seconds, clocks = _timed(sampler, a, b, out, burst_products, device)
                sustained.append((seconds, clocks))
                burst_rates.append(rates.achieved_tflops(matmul_flops(n, burst_products), seconds=seconds))
                if settled(burst_rates, window):
                    break
            short = []
            for _ in range(window):
                time.sleep(SHORT_PAUSE_S)
                short.append(_timed(sampler, a, b, out, 1, device))
        is_settled = settled(burst_rates, window)
        whole = {k: sampler.result.get(k) for k in ("max_sm_clock_mhz", "power_limit_w")}
        for kind, timed, products in (("sustained", sustained, burst_products), ("short", short, 1)):
            for i, (seconds, clocks) in enumerate(timed):
                rows.append({
                    "n": n, "kind": kind, "burst": i, "products": products, "burst_ms": seconds * 1e3,
                    "tflops": rates.achieved_tflops(matmul_flops(n, products), seconds=seconds),
                    "steady": kind == "sustained" and i >= len(timed) - window,
                    "settled": is_settled, **dict.fromkeys(COLUMNS), **clocks, **whole,
                })
        del a, b, out
    return rows


def summarize(rows: list[dict]) -> dict:
    """The ceiling (the median of the steady window at the n that sustains most), the short bursts'
    best, and whether the rate settled, for a log line."""
    steady = [r for r in rows if r.get("steady", True)] or rows
    by_n: dict[int, list[float]] = {}
    for r in steady:
        by_n.setdefault(r["n"], []).append(r["tflops"])
    n, rates = max(by_n.items(), key=lambda kv: statistics.median(kv[1]))
    short = [r["tflops"] for r in rows if r.get("kind") == "short"]
    return {"n": n, "ceiling_tflops": statistics.median(rates), "median_tflops": statistics.median(rates),
            "short_burst_tflops": max(short) if short else None,
            "settled": all(r.get("settled", True) for r in rows if r["n"] == n)}
