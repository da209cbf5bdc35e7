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

numpy, and scipy.stats for Student's and Welch's t intervals.
"""

from __future__ import annotations

import math
import statistics
import warnings
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
    from scipy import stats  # here, not at the top: seconds to import, and most callers never get here

    sem = stats.sem(logs)
    if sem == 0:  # processes that agree exactly: a point (scipy's interval would be nan)
        return math.exp(logs.mean()), math.exp(logs.mean())
    low, high = stats.t.interval(confidence, logs.size - 1, loc=logs.mean(), scale=sem)
    return math.exp(low), math.exp(high)


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
        if logs_a.var() + logs_b.var() > 0:  # else Welch's interval is 0/0
            from scipy import stats  # as in _t_interval_of_logs

            with warnings.catch_warnings():
                # A side whose processes agree exactly is an answer, not a loss of precision.
                warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
                welch = stats.ttest_ind(logs_b, logs_a, equal_var=False).confidence_interval(confidence)
            low, high = min(low, math.exp(welch.low)), max(high, math.exp(welch.high))
    return med_b / med_a, low, high
