"""Robust summary statistics of repeated step times."""

from __future__ import annotations

import statistics


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
