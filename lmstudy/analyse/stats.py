"""Statistics of repeated step times: within one process, and across fresh processes.

A step time depends on the process it was measured in (placement, clocks,
the host's other work) far more than on the steps inside one process: on an
H200, a launch-bound model's median moves 1.1x to 1.9x from one fresh
process to the next while its steps agree within 5-8%. So a configuration
is measured in several processes, and its number is the median over the
processes' medians, with an interval that sees both levels:

- a hierarchical bootstrap (processes resampled, then each resampled
  process's steps), as pyperf and nvbench treat worker processes;
- widened to at least Student's t interval over the processes' log-medians:
  with 2 processes a bootstrap has 3 distinct resamples of the processes
  and its percentile interval is no wider than their range, which covers the
  truth far less often than 95%. The t interval (1 degree of freedom for 2
  processes) is what an honest 2-process interval looks like.

numpy only (the measuring side uses it too, where scipy may be absent).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000


def summarize_ms(seconds: list[float]) -> dict[str, float]:
    """Mean, std, median, min, max, quartiles, IQR (ms) and CV of step times."""
    ms = [s * 1e3 for s in seconds]
    mean = statistics.fmean(ms)
    std = statistics.stdev(ms) if len(ms) > 1 else 0.0
    q1, _, q3 = statistics.quantiles(ms, n=4, method="inclusive") if len(ms) > 1 else (ms[0],) * 3
    return {
        "mean_ms": mean,
        "std_ms": std,
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "q1_ms": q1,
        "q3_ms": q3,
        "iqr_ms": q3 - q1,
        "cv": std / mean if mean else float("nan"),
    }


# Student's t distribution, from the regularized incomplete beta function.


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(confidence: float, df: float) -> float:
    """The t such that P(|T| <= t) = `confidence` (bisection on the two-sided tail)."""
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > 1 - confidence:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if t_two_sided_p(mid, df) > 1 - confidence else (low, mid)
    return (low + high) / 2


# Across processes.


def _clean(processes: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Each process's finite, positive samples; processes left with none are dropped."""
    kept = []
    for samples in processes:
        values = np.asarray([x for x in samples if x is not None and math.isfinite(x)], float)
        if values.size:
            kept.append(values)
    return kept


def bootstrap_medians(
    processes: Sequence[Sequence[float]], resamples: int = RESAMPLES, seed: int = 0
) -> np.ndarray:
    """`resamples` draws of the median over processes of each process's median, hierarchically resampled.

    Each draw picks as many processes as there are, with replacement, and
    resamples each picked process's steps on its own (a process picked
    twice gets two independent resamples).
    """
    rng = np.random.default_rng(seed)
    kept = _clean(processes)
    count = len(kept)
    # medians[p][b, k]: process p's steps resampled for draw b's k-th pick.
    medians = [
        np.median(samples[rng.integers(samples.size, size=(resamples, count, samples.size))], axis=2)
        for samples in kept
    ]
    picks = rng.integers(count, size=(resamples, count))
    stacked = np.stack(medians)  # [process, draw, pick]
    chosen = stacked[picks, np.arange(resamples)[:, None], np.arange(count)[None, :]]
    return np.median(chosen, axis=1)


def _t_interval_of_logs(logs: np.ndarray, confidence: float) -> tuple[float, float]:
    """Student's t interval of the mean of `logs` (two values at least), as (low, high) of exp."""
    half = t_quantile(confidence, logs.size - 1) * logs.std(ddof=1) / math.sqrt(logs.size)
    return math.exp(logs.mean() - half), math.exp(logs.mean() + half)


def process_summary(
    processes: Sequence[Sequence[float]], confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES, seed: int = 0,
) -> dict:
    """The number of a configuration measured in several processes: `processes` holds each one's samples.

    median: the median over processes of each one's median; ci_low/ci_high:
    the hierarchical bootstrap's interval, widened to Student's t interval
    over the processes' log-medians where that is wider (two or more
    processes); spread: the processes' medians' max/min - 1 (0 for one).
    """
    kept = _clean(processes)
    nan = float("nan")
    if not kept:
        return {"median": nan, "ci_low": nan, "ci_high": nan, "processes": 0, "spread": nan,
                "process_medians": []}
    medians = [float(np.median(s)) for s in kept]
    draws = bootstrap_medians(kept, resamples, seed)
    tail = (1 - confidence) / 2 * 100
    low, high = (float(x) for x in np.percentile(draws, [tail, 100 - tail]))
    if len(kept) > 1 and min(medians) > 0:
        t_low, t_high = _t_interval_of_logs(np.log(medians), confidence)
        low, high = min(low, t_low), max(high, t_high)
    return {
        "median": float(np.median(medians)),
        "ci_low": low,
        "ci_high": high,
        "processes": len(kept),
        "spread": max(medians) / min(medians) - 1 if min(medians) > 0 else nan,
        "process_medians": medians,
    }


def ratio_interval(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES, seed: int = 0,
) -> tuple[float, float, float]:
    """B/A of two configurations measured in processes: (ratio of medians, low, high).

    The interval is the hierarchical bootstrap's (each side resampled on its
    own), widened to Welch's t interval of the difference of the sides' mean
    log-medians where that is wider (two processes a side or more).
    """
    a, b = _clean(a), _clean(b)
    nan = float("nan")
    if not a or not b:
        return nan, nan, nan
    med_a = float(np.median([np.median(s) for s in a]))
    med_b = float(np.median([np.median(s) for s in b]))
    draws = bootstrap_medians(b, resamples, seed + 1) / bootstrap_medians(a, resamples, seed)
    tail = (1 - confidence) / 2 * 100
    low, high = (float(x) for x in np.percentile(draws, [tail, 100 - tail]))
    if len(a) > 1 and len(b) > 1:
        logs_a = np.log([np.median(s) for s in a])
        logs_b = np.log([np.median(s) for s in b])
        var_a, var_b = logs_a.var(ddof=1) / logs_a.size, logs_b.var(ddof=1) / logs_b.size
        if var_a + var_b > 0:
            df = (var_a + var_b) ** 2 / (var_a**2 / (logs_a.size - 1) + var_b**2 / (logs_b.size - 1))
            half = t_quantile(confidence, df) * math.sqrt(var_a + var_b)
            diff = logs_b.mean() - logs_a.mean()
            low, high = min(low, math.exp(diff - half)), max(high, math.exp(diff + half))
    return med_b / med_a, low, high
