"""The verdict rule of a comparison on synthetic samples with known effects.

(lmstudy.analyse.compare.verdict)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lmstudy.analyse.compare import verdict as V


@pytest.mark.parametrize(
    ("t", "df", "p"),
    [(2.228138851986274, 10, 0.05), (3.169272667616207, 10, 0.01), (1.959963984540054, 1e7, 0.05),
     (12.706204736174705, 1, 0.05), (0.0, 5, 1.0)],
)
def test_the_t_tail_matches_known_critical_values(t, df, p):
    assert V.t_two_sided_p(t, df) == pytest.approx(p, rel=1e-6, abs=1e-12)


def test_welch_matches_a_hand_computed_case():
    # a: mean 2, var 1; b: mean 4, var 1; n 3 a side: t = 2 / sqrt(2/3) = 2.449, df = 4.
    p = V.welch_p([1, 2, 3], [3, 4, 5])
    assert p == pytest.approx(V.t_two_sided_p(2 / math.sqrt(2 / 3), 4))
    assert 0.05 < p < 0.1


def test_the_rank_test_matches_its_exact_distribution():
    # Every B below every A, 3 a side: 1 of C(6,3) = 20 orderings each way.
    assert V.mann_whitney_p([4, 5, 6], [1, 2, 3]) == pytest.approx(2 / 20)
    # 10 a side, completely separated: 2 / C(20, 10).
    assert V.mann_whitney_p(range(10, 20), range(10)) == pytest.approx(2 / 184756)
    # Interleaved: no evidence.
    assert V.mann_whitney_p([1, 3, 5, 7], [2, 4, 6, 8]) > 0.5
    assert V.rank_test_can_decide(5, 5, 0.01) and not V.rank_test_can_decide(4, 4, 0.01)


def steps(rng, median_ms, n, cv):
    """Step times as a GPU gives them: log-normal around a median, one in twenty a slow outlier."""
    times = median_ms * np.exp(rng.normal(0, cv, n))
    times[rng.random(n) < 0.05] *= 1.5
    return times


def test_a_ten_percent_shift_is_flagged_in_both_directions():
    rng = np.random.default_rng(1)
    flagged_faster = flagged_slower = 0
    for _ in range(200):
        a = steps(rng, 100.0, 10, 0.01)
        flagged_faster += V.compare_samples(a, steps(rng, 90.0, 10, 0.01)).verdict == V.FASTER
        flagged_slower += V.compare_samples(a, steps(rng, 110.0, 10, 0.01)).verdict == V.SLOWER
    # Nine in ten at least, though one step in twenty is a 1.5x outlier on either side.
    assert flagged_faster >= 180 and flagged_slower >= 180


def test_pure_noise_is_not_flagged_in_most_draws():
    rng = np.random.default_rng(2)
    for cv in (0.005, 0.02, 0.05):
        flagged = sum(
            V.compare_samples(steps(rng, 50.0, 10, cv), steps(rng, 50.0, 10, cv)).verdict != V.SAME
            for _ in range(300)
        )
        # At level 0.01, and with the 3% minimum effect on top, at most a few in a hundred.
        assert flagged <= 6, (cv, flagged)


def test_a_significant_shift_below_the_minimum_effect_is_the_same():
    rng = np.random.default_rng(3)
    a, b = 100 * np.exp(rng.normal(0, 0.001, 30)), 101.5 * np.exp(rng.normal(0, 0.001, 30))
    result = V.compare_samples(a, b)
    assert result.p_value < 1e-6 and result.verdict == V.SAME
    assert V.compare_samples(a, b, min_effect=0.01).verdict == V.SLOWER


def test_a_large_shift_drowned_in_noise_is_the_same():
    a = [10.0, 30.0, 12.0]
    b = [14.0, 11.0, 40.0]
    result = V.compare_samples(a, b)
    assert result.ratio == pytest.approx(14 / 12) and result.verdict == V.SAME


def test_three_clearly_separated_steps_a_side_are_enough():
    # The smoke preset times 3 steps: a rank test cannot reach p < 0.05 there, the t-test can.
    result = V.compare_samples([10.0, 10.2, 9.9], [20.1, 19.8, 20.0])
    assert result.verdict == V.SLOWER and result.p_value < V.ALPHA
    assert result.ci_low > 1 and result.ci_high < 2.1


def test_ratio_and_interval_are_of_medians_and_reproducible():
    a, b = [10.0, 11.0, 10.5, 50.0], [5.0, 5.5, 5.25, 5.1]
    first, second = V.compare_samples(a, b), V.compare_samples(a, b)
    assert first == second
    assert first.ratio == pytest.approx(np.median(b) / np.median(a))
    assert first.ci_low <= first.ratio <= first.ci_high


def test_too_few_samples_is_said_so():
    assert V.compare_samples([10.0], [5.0, 5.1]).verdict == V.TOO_FEW
    assert V.compare_samples([], [5.0]).verdict == V.TOO_FEW


def test_summaries_give_the_same_verdicts_without_an_interval():
    a = {"median": 10.0, "mean": 10.0, "std": 0.1, "n": 20}
    faster = V.compare_summaries(a, {"median": 9.0, "mean": 9.0, "std": 0.1, "n": 20})
    same = V.compare_summaries(a, {"median": 10.05, "mean": 10.05, "std": 0.1, "n": 20})
    noisy = V.compare_summaries(a, {"median": 9.0, "mean": 9.0, "std": 5.0, "n": 20})
    assert (faster.verdict, same.verdict, noisy.verdict) == (V.FASTER, V.SAME, V.SAME)
    assert math.isnan(faster.ci_low)


def test_the_noise_band_is_log_symmetric():
    low, high = V.noise_band(0.03)
    assert low * high == pytest.approx(1.0) and high == pytest.approx(1.03)
    assert V.decide(1.03, 0.0) == V.SLOWER and V.decide(1 / 1.03, 0.0) == V.FASTER
    assert V.decide(1.029, 0.0) == V.SAME
