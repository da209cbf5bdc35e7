"""The wall-time verdict on the noise measured on an H200 (issue 30): false alarms and power, by simulation.

A host-bound step time of a fresh process is drawn from a two-humped
distribution about 2x wide. Issue 30 gives the range of the processes'
medians for several ways of starting them; a model with two humps (a share
`w` of the processes in the upper one, `gap` apart in log, each hump
log-normal with spread `width`) is fitted to those ranges here, then
10,000 A/A comparisons of 27 rows (the quick preset's timing rows), each row
measured in 2 to 4 processes a side, are judged by the comparison's own
interval (lmstudy.analyse.stats.pooled_intervals) and verdict rule.

The simulation covers the interval between processes, which is what two to
four processes can get wrong; the comparison widens it further to the
hierarchical bootstrap over each process's steps (tables.judge), which can
only lower the false alarms counted here.

`pytest -s` prints the rates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from lmstudy.analyse import stats
from lmstudy.analyse.compare import verdict as V

MIN_EFFECT = 0.03  # config.yaml's compare.min_effect
DRAWS = 10_000
ROWS = 27  # the quick preset's steady-state timing rows
RESAMPLES = 1000  # of the pool's null distribution per draw: enough for its 95% quantile here

# Issue 30's table: (processes, lowest median ms, highest median ms) of one configuration's fresh
# processes, small ctx 256 fp32 forward and 2.7B bf16 forward, each way of starting them.
ISSUE_RANGES = [
    (13, 10.8, 21.2), (10, 11.3, 25.8), (6, 11.5, 22.7), (6, 12.0, 18.0), (2, 11.6, 15.2),
    (9, 37.1, 64.1), (6, 36.0, 81.3), (6, 37.9, 68.3), (6, 56.1, 71.2), (2, 37.2, 48.8),
]
# The upper hump's share: the ranges cannot tell it, so the rule must hold for each.
UPPER_SHARES = (0.2, 0.5, 0.8)


def _draw(rng, shape, upper: float, gap: float, width: float) -> np.ndarray:
    """Log-medians of processes from the two-humped model."""
    return gap * (rng.random(shape) < upper) + rng.normal(0.0, width, shape)


def fit(upper: float) -> tuple[float, float]:
    """(gap, width) whose mean log range of n processes fits ISSUE_RANGES best (least squares), among
    two-humped ones (humps at least 3 widths apart: the issue's observation, which ranges alone
    cannot tell from one broad hump).

    Common random numbers over a grid: each (gap, width) sees the same draws, so the fit is smooth.
    """
    rng = np.random.default_rng(0)
    gaps, widths = np.arange(0.1, 0.91, 0.025), np.arange(0.01, 0.2, 0.01)
    error = np.where(gaps[:, None] >= 3 * widths[None, :], 0.0, np.inf)
    for count, low, high in ISSUE_RANGES:
        hump = rng.random((500, count)) < upper
        noise = rng.normal(size=(500, count))
        logs = gaps[:, None, None, None] * hump + widths[None, :, None, None] * noise
        mean_range = (logs.max(axis=-1) - logs.min(axis=-1)).mean(axis=-1)
        error += (mean_range - math.log(high / low)) ** 2
    i, j = np.unravel_index(error.argmin(), error.shape)
    return float(gaps[i]), float(widths[j])


def _counts(rng, count, draws) -> np.ndarray:
    """Processes a row side: a fixed count, or 2 to 4 at random (as repetition leaves them)."""
    if count == "2-4":
        return rng.integers(2, 5, size=(draws, ROWS))
    return np.full((draws, ROWS), count)


def _sides(rng, upper, gap, width, count, change=1.0, scale=None, draws=DRAWS):
    """A's and B's log-medians (draws, ROWS, 4), NaN beyond each side's count; B changed by `change`."""
    sides = []
    for shift in (0.0, math.log(change)):
        logs = _draw(rng, (draws, ROWS, 4), upper, gap, width)
        if scale is not None:  # rows of one regime that wander more or less than each other
            logs = logs * scale
        logs = logs + shift
        logs[np.arange(4)[None, None, :] >= _counts(rng, count, draws)[..., None]] = np.nan
        sides.append(logs)
    return sides


def pooled_verdicts(logs_a, logs_b) -> np.ndarray:
    centre, half = stats.pooled_intervals(logs_a, logs_b, V.POOLED_CONFIDENCE, resamples=RESAMPLES, seed=1)
    return np.vectorize(V.decide)(np.exp(centre - half), np.exp(centre + half), MIN_EFFECT)


def welch_verdicts(logs_a, logs_b) -> np.ndarray:
    """The rule before this change: Welch's t interval over each row's own processes."""
    mean_a, mean_b = np.nanmean(logs_a, -1), np.nanmean(logs_b, -1)
    n_a, n_b = np.isfinite(logs_a).sum(-1), np.isfinite(logs_b).sum(-1)
    var_a, var_b = np.nanvar(logs_a, -1, ddof=1) / n_a, np.nanvar(logs_b, -1, ddof=1) / n_b
    freedom = (var_a + var_b) ** 2 / (var_a ** 2 / (n_a - 1) + var_b ** 2 / (n_b - 1))
    half = scipy_stats.t.ppf(0.975, freedom) * np.sqrt(var_a + var_b)
    centre = mean_b - mean_a
    return np.vectorize(V.decide)(np.exp(centre - half), np.exp(centre + half), MIN_EFFECT)


def claimed(verdicts) -> float:
    return float(np.isin(verdicts, [V.FASTER, V.SLOWER]).mean())


@pytest.fixture(scope="module")
def models() -> dict[float, tuple[float, float]]:
    return {upper: fit(upper) for upper in UPPER_SHARES}


def test_the_fitted_model_is_two_humped_and_about_twice_as_wide_as_the_issue_says(models):
    rng = np.random.default_rng(2)
    for upper, (gap, width) in models.items():
        logs = _draw(rng, (4000, 20), upper, gap, width)
        spread = math.exp((logs.max(-1) - logs.min(-1)).mean())
        print(f"upper hump {upper:.0%}: humps {math.exp(gap):.2f}x apart, each {width:.2f} wide in log; "
              f"20 processes span {spread:.2f}x")
        # Issue 30: 10.8 to 25.8 ms over 20 processes (2.4x); the ranges above 1.3x to 2.3x.
        assert 1.6 < spread < 2.8


@pytest.mark.parametrize("count", [2, "2-4"])
def test_an_aa_comparison_calls_at_most_5_percent_of_rows(models, count):
    rng = np.random.default_rng(3)
    for upper, (gap, width) in models.items():
        pooled = claimed(pooled_verdicts(*_sides(rng, upper, gap, width, count)))
        print(f"{count} processes a side, upper hump {upper:.0%}: A/A faster or slower in "
              f"{pooled:.2%} of rows")
        assert pooled <= 0.05


def test_rows_of_uneven_noise_in_one_regime_keep_false_alarms_under_5_percent(models):
    # Rows whose processes wander 0.5 to 1.5 times as far as each other's: the pool fits none exactly;
    # a row noisier than its regime keeps its own, wider, spread.
    rng = np.random.default_rng(7)
    for upper, (gap, width) in models.items():
        scale = rng.uniform(0.5, 1.5, (DRAWS, ROWS, 1))
        uneven = claimed(pooled_verdicts(*_sides(rng, upper, gap, width, "2-4", scale=scale)))
        print(f"2-4 processes a side, uneven rows, upper hump {upper:.0%}: A/A faster or slower in "
              f"{uneven:.2%} of rows")
        assert uneven <= 0.05


def test_welchs_interval_on_two_processes_a_side_called_noise_a_change(models):
    # What the pooled interval mends: the issue's A/A on H200s called 11% of timing rows.
    rng = np.random.default_rng(4)
    rates = {upper: claimed(welch_verdicts(*_sides(rng, upper, gap, width, 2)))
             for upper, (gap, width) in models.items()}
    print("Welch, 2 processes a side: A/A faster or slower in "
          + ", ".join(f"{r:.2%} (upper hump {u:.0%})" for u, r in rates.items()))
    assert max(rates.values()) > 0.05


@pytest.mark.parametrize("count", [2, 4])
def test_a_large_change_is_called_and_a_small_one_is_said_undecided_not_the_same(models, count):
    rng = np.random.default_rng(5)
    for upper, (gap, width) in models.items():
        power = {}
        for change in (1.1, 1.5, 2.0, 4.0):
            # Power needs fewer draws than a false-alarm rate near its bound.
            verdicts = pooled_verdicts(*_sides(rng, upper, gap, width, count, change=change, draws=2000))
            power[change] = float((verdicts == V.SLOWER).mean())
            # A change inside the host's wander is never called faster, nor the same.
            assert not np.isin(verdicts, [V.FASTER, V.SAME]).mean() > 0.05
        print(f"{count} processes a side, upper hump {upper:.0%}: slower in "
              + ", ".join(f"{p:.1%} at {c:g}x" for c, p in power.items()))
        assert power[4.0] >= 0.9  # batch x4 on a host-bound row is seen
        assert power[4.0] >= power[2.0] >= power[1.5] >= power[1.1]


def test_gpu_bound_rows_decide_a_few_percent():
    # Rows whose processes agree within 0.3% (the 2.7B model in fp32): a 10% change is called, and
    # A/A rows are the same, from the same pooled interval.
    rng = np.random.default_rng(6)
    quiet = (0.5, 0.0, 0.002)
    aa = pooled_verdicts(*_sides(rng, *quiet, 2, draws=2000))
    ab = pooled_verdicts(*_sides(rng, *quiet, 2, change=1.1, draws=2000))
    print(f"GPU-bound, 2 processes a side: A/A same in {(aa == V.SAME).mean():.1%}, "
          f"faster or slower in {claimed(aa):.2%}; 1.1x slower in {(ab == V.SLOWER).mean():.1%}")
    assert claimed(aa) <= 0.05 and (aa == V.SAME).mean() >= 0.95 and (ab == V.SLOWER).mean() >= 0.95
