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
    resamples: int = RESAMPLES, seed: int = 0, welch: bool = True,
) -> tuple[float, float, float]:
    """B/A of two configurations measured in processes: (ratio of medians, low, high).

    The interval is the hierarchical bootstrap's (each side resampled on its
    own), widened to Welch's t interval of the difference of the sides' mean
    log-medians where that is wider (two processes a side or more, and
    `welch`: a caller with a pooled interval widens to that instead).
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
    if welch and len(a) > 1 and len(b) > 1:
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


# Borrowing strength across rows: the variation between processes of many rows, pooled.
#
# With 2 to 4 processes a side, one row's own processes cannot say how far its medians wander: on a
# host-bound row a fresh process's median is drawn from a two-humped distribution about 2x wide, and
# a t interval over 2 + 2 such medians (1 to 2 degrees of freedom) is either too wide to decide or,
# when both of A's processes fall in one hump and both of B's in the other, confidently wrong. Rows of
# one regime (host-bound or not) in both runs share how far a process wanders, though; every pair of
# processes of one side of one row is a draw of that wander (X - X': the row's own level cancels,
# and so does any difference between A and B), so the pairs of all the regime's rows give its
# distribution with many degrees of freedom, two humps included. Under "no change" a row's
# difference of mean log-medians, m processes a side, is the mean of m such differences: its null
# distribution is simulated from the pool, and its `confidence` quantile is the half-width of the
# interval (the comparison takes lmstudy.analyse.compare.verdict.POOLED_CONFIDENCE).

POOL_RESAMPLES = 20000


def side_differences(logs: np.ndarray) -> np.ndarray:
    """Every pair's difference of one side's processes, for `logs` (..., rows, processes), NaN-padded.

    Returns (..., rows * pairs): NaN where a pair has a missing process.
    """
    logs = np.asarray(logs, float)
    count = logs.shape[-1]
    first, second = np.triu_indices(count, k=1)
    pairs = logs[..., first] - logs[..., second]
    return pairs.reshape(*logs.shape[:-2], -1)


def pooled_half_width(differences: np.ndarray, m: int, confidence: float = CONFIDENCE,
                      resamples: int = POOL_RESAMPLES, seed: int = 0) -> np.ndarray:
    """The `confidence` quantile of |mean of m differences| drawn from each pool (last axis, NaN-padded).

    The null distribution of a row's difference of mean log-medians with m processes a side (see
    above). Differences are symmetric by construction (X - X' and X' - X are equally likely), so
    each draw gets a random sign. Vectorised over the leading axes (a simulation's draws); a pool
    with no finite difference gives NaN.
    """
    rng = np.random.default_rng(seed)
    pools = np.asarray(differences, float)
    lead = pools.shape[:-1]
    pools = pools.reshape(-1, pools.shape[-1])
    # Finite values first, so that an index below a pool's count picks one of them.
    counts = np.isfinite(pools).sum(axis=1)
    ordered = np.take_along_axis(pools, np.argsort(~np.isfinite(pools), axis=1, kind="stable"), axis=1)
    width = np.empty(pools.shape[0])
    chunk = max(1, 2_000_000 // (resamples * m))  # pools at a time: a few tens of MB of draws
    for start in range(0, pools.shape[0], chunk):
        part = slice(start, start + chunk)
        size = (ordered[part].shape[0], resamples, m)
        picks = (rng.random(size) * np.maximum(counts[part], 1)[:, None, None]).astype(int)
        drawn = ordered[part][np.arange(size[0])[:, None, None], picks]
        drawn *= rng.choice(np.array([-1.0, 1.0]), size=size)
        width[part] = np.quantile(np.abs(drawn.mean(axis=2)), confidence, axis=1)
    width[counts == 0] = np.nan
    return width.reshape(lead)


def pooled_variance(logs_a: np.ndarray, logs_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's own variance of log-medians (both sides, each about its own mean), and the pool's.

    `logs_a`, `logs_b`: (..., rows, processes), NaN-padded. Returns (own variance per row, its
    degrees of freedom per row, the pooled variance over the rows); NaN where there is no degree
    of freedom.
    """
    squares, freedom = 0.0, 0
    for logs in (np.asarray(logs_a, float), np.asarray(logs_b, float)):
        count = np.isfinite(logs).sum(axis=-1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a side with no process: its mean is NaN
            mean = np.nanmean(logs, axis=-1, keepdims=True)
        squares = squares + np.nansum((logs - mean) ** 2, axis=-1)
        freedom = freedom + np.maximum(count - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        own = np.where(freedom > 0, squares / np.maximum(freedom, 1), np.nan)
        total = freedom.sum(axis=-1)
        pooled = np.where(total > 0, squares.sum(axis=-1) / np.maximum(total, 1), np.nan)
    return own, freedom, pooled


def pooled_intervals(logs_a: np.ndarray, logs_b: np.ndarray, confidence: float = CONFIDENCE,
                     resamples: int = POOL_RESAMPLES, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The log-interval of B/A for every row of one regime, its processes' spread pooled over the rows.

    `logs_a`, `logs_b`: (..., rows, processes) log-medians of the processes, NaN-padded, all rows of
    one regime (leading axes: independent comparisons, as a simulation's draws). Returns (centre,
    half-width) per row: centre the difference of mean log-medians, half-width the pool's null
    quantile (pooled_half_width) for m = the smaller side's count, scaled to the row's sizes, and
    never narrower than the row's own spread allows (where its processes disagree more than the
    regime's, its own variance takes the place of the pool's).
    """
    logs_a, logs_b = np.asarray(logs_a, float), np.asarray(logs_b, float)
    count_a, count_b = np.isfinite(logs_a).sum(axis=-1), np.isfinite(logs_b).sum(axis=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = np.nanmean(logs_b, axis=-1) - np.nanmean(logs_a, axis=-1)
    pool = np.concatenate([side_differences(logs_a), side_differences(logs_b)], axis=-1)
    own, _, pooled = pooled_variance(logs_a, logs_b)
    smaller = np.minimum(count_a, count_b)
    half = np.full(centre.shape, np.nan)
    for m in np.unique(smaller[smaller > 0]):
        width = pooled_half_width(pool, int(m), confidence, resamples, seed)[..., None]
        half = np.where(smaller == m, width, half)
    with np.errstate(invalid="ignore", divide="ignore"):
        # The quantile is for m a side; a row with more on one side has a smaller variance of its
        # difference, by sqrt((1/na + 1/nb) / (2/m)).
        half = half * np.sqrt((1 / count_a + 1 / count_b) / (2 / np.maximum(smaller, 1)))
        widen = np.sqrt(np.where(np.isfinite(own), own, 0) / pooled[..., None])
    half = half * np.maximum(1.0, np.nan_to_num(widen, nan=1.0))
    return centre, half
