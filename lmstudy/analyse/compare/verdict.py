"""Is B faster than A, slower, or the same within noise? The verdict rule of a comparison.

Two sets of per-step times of one configuration, A's and B's. The verdict
follows the two tools that do this well elsewhere:

- `asv compare` flags a benchmark only when the ratio exceeds a factor *and*
  the samples differ significantly (a Mann-Whitney U test);
- pyperf's `compare_to` tests the two samples (Student's t) and ignores
  differences below a minimum speed change.

Here: B differs from A when the two samples differ significantly (p <
`alpha`) *and* the ratio of medians B/A is at least a factor 1 + `min_effect`
away from 1 (log-symmetric: 1.03 slower or 1/1.03 faster), the two agreeing
in direction. The test is asv's: the Mann-Whitney U test (exact
distribution), robust to a stray slow step, wherever the sample sizes let it
reach p < `alpha` at all (5 steps a side at 0.01); with fewer steps (the smoke
preset times 3, where a rank test cannot go below p = 0.1) it is Welch's
t-test on the logarithms of the step times (scale-free, unequal variances),
as pyperf tests. The ratio shown is that of medians, with a percentile
bootstrap interval; the bootstrap is seeded, so a report rebuilt from the
same files is the same.

The samples are steps of one process each: they show the noise within a
run, not between two processes on the same GPU (clocks, placement), which
on a launch-bound model is 1-3%: that is what the minimum effect absorbs.

No scipy: the t distribution's tail comes from the regularized incomplete
beta function below (numpy and math only).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

FASTER = "faster"
SLOWER = "slower"
SAME = "same within noise"
TOO_FEW = "too few samples"
VERDICTS = (FASTER, SLOWER, SAME, TOO_FEW)

MIN_EFFECT = 0.03
ALPHA = 0.01
CONFIDENCE = 0.95
RESAMPLES = 2000


@dataclasses.dataclass(frozen=True)
class Comparison:
    """B against A for one configuration; ratio = B / A (below 1: B is faster)."""

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str


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


def _gaussian_binomial(m: int, n: int) -> list[int]:
    """Coefficients of the Gaussian binomial [m+n choose m] in q: how many orderings give each U."""
    coefficients = [1] + [0] * (m * n)
    for i in range(1, m + 1):
        for k in range(m * n, n + i - 1, -1):  # times (1 - q^(n+i))
            coefficients[k] -= coefficients[k - n - i]
        for k in range(i, m * n + 1):  # over (1 - q^i): exact, the partial product is a polynomial
            coefficients[k] += coefficients[k - i]
    return coefficients


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test, from U's exact distribution (ties count a half)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    u = float((b[None, :] < a[:, None]).sum() + 0.5 * (b[None, :] == a[:, None]).sum())
    m, n = len(a), len(b)
    counts = _gaussian_binomial(min(m, n), max(m, n))
    total = sum(counts)
    below = sum(counts[: math.floor(u) + 1]) / total  # P(U <= u)
    above = sum(counts[math.ceil(u):]) / total  # P(U >= u)
    return min(1.0, 2 * min(below, above))


def rank_test_can_decide(n_a: int, n_b: int, alpha: float = ALPHA) -> bool:
    """Whether the rank test's smallest p-value (every B below every A) is below `alpha`."""
    return 2 / math.comb(n_a + n_b, n_a) < alpha


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test of equal means (needs two values a side)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = b.mean() - a.mean()
    if va + vb == 0:
        return 1.0 if diff == 0 else 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return t_two_sided_p(diff / math.sqrt(va + vb), df)


def welch_p_from_summary(mean_a, std_a, n_a, mean_b, std_b, n_b) -> float:
    """Welch's test from each side's mean, standard deviation and count (where no samples were kept)."""
    va, vb = std_a**2 / n_a, std_b**2 / n_b
    diff = mean_b - mean_a
    if va + vb == 0:
        return 1.0 if diff == 0 else 0.0
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    return t_two_sided_p(diff / math.sqrt(va + vb), df)


def bootstrap_ratio_ci(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES, seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(B) / median(A), each side resampled on its own."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a, float), np.asarray(b, float)
    med_a = np.median(rng.choice(a, size=(resamples, len(a))), axis=1)
    med_b = np.median(rng.choice(b, size=(resamples, len(b))), axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(med_b / med_a, [tail, 100 - tail])
    return float(low), float(high)


def decide(ratio: float, p_value: float, min_effect: float = MIN_EFFECT, alpha: float = ALPHA,
           direction: float | None = None) -> str:
    """The verdict from a ratio B/A and a p-value: faster or slower only when both clear their bar.

    `direction`: the sign of the tested difference (B minus A); it must agree with the ratio.
    """
    if not (math.isfinite(ratio) and ratio > 0 and math.isfinite(p_value)):
        return TOO_FEW
    beyond = abs(math.log(ratio)) >= math.log1p(min_effect) - 1e-12
    agree = direction is None or direction == 0 or (direction < 0) == (ratio < 1)
    if p_value < alpha and beyond and agree:
        return FASTER if ratio < 1 else SLOWER
    return SAME


def compare_samples(
    a: Sequence[float], b: Sequence[float], min_effect: float = MIN_EFFECT, alpha: float = ALPHA,
    confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0,
) -> Comparison:
    """B's step times against A's (same unit, all positive): ratio, interval, p-value and verdict."""
    a = np.asarray([x for x in a if x is not None and math.isfinite(x)], float)
    b = np.asarray([x for x in b if x is not None and math.isfinite(x)], float)
    if len(a) == 0 or len(b) == 0:
        nan = float("nan")
        return Comparison(len(a), len(b), nan, nan, nan, nan, nan, nan, TOO_FEW)
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError("step times must be positive")
    median_a, median_b = float(np.median(a)), float(np.median(b))
    ratio = median_b / median_a
    if len(a) < 2 or len(b) < 2:
        nan = float("nan")
        return Comparison(len(a), len(b), median_a, median_b, ratio, nan, nan, nan, TOO_FEW)
    log_a, log_b = np.log(a), np.log(b)
    if rank_test_can_decide(len(a), len(b), alpha):
        p_value = mann_whitney_p(a, b)
    else:
        p_value = welch_p(log_a, log_b)
    low, high = bootstrap_ratio_ci(a, b, confidence, resamples, seed)
    verdict = decide(ratio, p_value, min_effect, alpha)
    return Comparison(len(a), len(b), median_a, median_b, ratio, low, high, p_value, verdict)


def compare_summaries(
    a: dict, b: dict, min_effect: float = MIN_EFFECT, alpha: float = ALPHA
) -> Comparison:
    """The same verdict where only summaries were kept: {'median', 'mean', 'std', 'n'} a side.

    Welch's test then runs on the times themselves (not their logarithms),
    and there is no interval.
    """
    nan = float("nan")
    ratio = b["median"] / a["median"] if a["median"] and b["median"] else nan
    n_a, n_b = int(a["n"]), int(b["n"])
    if n_a < 2 or n_b < 2 or not all(math.isfinite(x) for x in (a["std"], b["std"], ratio)):
        return Comparison(n_a, n_b, a["median"], b["median"], ratio, nan, nan, nan, TOO_FEW)
    p_value = welch_p_from_summary(a["mean"], a["std"], n_a, b["mean"], b["std"], n_b)
    verdict = decide(ratio, p_value, min_effect, alpha, direction=b["mean"] - a["mean"])
    return Comparison(n_a, n_b, a["median"], b["median"], ratio, nan, nan, p_value, verdict)


def noise_band(min_effect: float = MIN_EFFECT) -> tuple[float, float]:
    """The ratios B/A that count as the same whatever the test says."""
    return 1 / (1 + min_effect), 1 + min_effect
