"""The verdict rule: faster, slower, same or undecided from the variation between processes."""

import math

import numpy as np
import pytest

from lmstudy.analyse import stats
from lmstudy.analyse.compare import verdict as V
from lmstudy.measure.repeat import NoisePolicy, measure_until_stable, spread
from lmstudy.phases import PhaseClock

MIN_EFFECT = 0.03  # the band these tests' verdicts are worked out for (config.yaml ships the same)


def test_two_processes_get_students_interval_with_one_degree_of_freedom():
    # Steps that never vary: the bootstrap's interval is the two medians, the t interval far wider.
    # 12.7062 is Student's t's 97.5% point for 1 degree of freedom (the tables' value).
    summary = stats.process_summary([[10.0] * 5, [12.0] * 5])
    logs = np.log([10.0, 12.0])
    half = 12.7062 * logs.std(ddof=1) / math.sqrt(2)
    assert summary["ci_low"] == pytest.approx(math.exp(logs.mean() - half), rel=1e-4)
    assert summary["ci_high"] == pytest.approx(math.exp(logs.mean() + half), rel=1e-4)
    # Processes that agree exactly have no t interval to widen to.
    assert stats.process_summary([[10.0] * 5, [10.0] * 5])["ci_low"] == 10.0


def test_the_ratio_of_two_by_two_processes_gets_welchs_interval():
    # Equal variances and sizes: Welch's degrees of freedom are 2, whose 97.5% point is 4.3027.
    a, b = [[10.0] * 5, [12.0] * 5], [[20.0] * 5, [24.0] * 5]
    _, low, high = stats.ratio_interval(a, b)
    logs = np.log([10.0, 12.0])
    half = 4.3027 * math.sqrt(2 * logs.var(ddof=1) / 2)
    assert (low, high) == pytest.approx((2 * math.exp(-half), 2 * math.exp(half)), rel=1e-4)


def processes(rng, median_ms, count, between=0.0, within=0.01, steps=10):
    """Step samples of `count` processes: each one's level (log-normal, `between`), its steps around it."""
    levels = median_ms * np.exp(rng.normal(0, between, count))
    return [list(level * np.exp(rng.normal(0, within, steps))) for level in levels]


def test_a_ten_percent_shift_is_called_in_both_directions():
    rng = np.random.default_rng(1)
    faster = slower = 0
    for _ in range(100):
        a = processes(rng, 100.0, 3, between=0.01)
        shorter, longer = processes(rng, 90.0, 3, between=0.01), processes(rng, 110.0, 3, between=0.01)
        faster += V.compare_processes(a, shorter, MIN_EFFECT).verdict == V.FASTER
        slower += V.compare_processes(a, longer, MIN_EFFECT).verdict == V.SLOWER
    assert faster >= 90 and slower >= 90


@pytest.mark.parametrize("between", [0.002, 0.02, 0.2])
def test_pure_noise_is_same_or_undecided_in_95_percent_of_draws(between):
    rng = np.random.default_rng(2)
    claims = sum(
        V.compare_processes(processes(rng, 50.0, 2, between), processes(rng, 50.0, 2, between),
                            MIN_EFFECT).verdict
        in (V.FASTER, V.SLOWER)
        for _ in range(300)
    )
    assert claims <= 15, (between, claims)


def test_variation_between_processes_is_not_hidden_by_steps_that_agree():
    # Two processes a side, each with steps that agree within 0.1%, but processes 20% apart:
    # the step-level test of the old rule called this faster; the processes say undecided.
    a = [[100.0, 100.1, 99.9] * 3, [120.0, 120.1, 119.9] * 3]
    b = [[95.0, 95.1, 94.9] * 3, [112.0, 112.1, 111.9] * 3]
    assert V.compare_processes(a, b, MIN_EFFECT).verdict == V.UNDECIDED


def test_same_needs_the_whole_interval_inside_the_band():
    rng = np.random.default_rng(3)
    a = processes(rng, 100.0, 4, between=0.001, within=0.001)
    b = processes(rng, 101.0, 4, between=0.001, within=0.001)
    result = V.compare_processes(a, b, MIN_EFFECT)
    assert result.verdict == V.SAME and 1 / 1.03 < result.ci_low <= result.ci_high < 1.03
    assert V.compare_processes(a, b, min_effect=0.001).verdict == V.SLOWER


def test_one_process_a_side_never_claims():
    result = V.compare_processes([[10.0, 10.1, 10.2]], [[20.0, 20.1, 20.2], [20.3, 20.1, 20.2]], MIN_EFFECT)
    assert result.verdict == V.ONE_PROCESS and result.ratio == pytest.approx(2.0, rel=0.02)
    assert V.processes_of("[10.0, 10.1]") == [[10.0, 10.1]]  # a flat list: a run made before repetition
    assert V.processes_of("[[10.0], [11.0]]") == [[10.0], [11.0]]
    assert V.compare_processes([], [[5.0]], MIN_EFFECT).verdict == V.TOO_FEW


def test_identical_runs_are_the_same_not_faster():
    a = [[10.0, 10.1, 10.2], [10.1, 10.0, 10.3]]
    assert V.compare_processes(a, a, MIN_EFFECT).verdict == V.SAME
    assert V.change_verdict(5.0, 5.0, MIN_EFFECT) == V.SAME
    assert V.change_verdict(0.0, 0.0, MIN_EFFECT) == V.SAME
    assert V.change_verdict(5.0, 5.1, MIN_EFFECT) == V.SAME
    assert V.change_verdict(5.0, 4.0, MIN_EFFECT) == V.FASTER
    assert V.change_verdict(0.0, 1.0, MIN_EFFECT) == "appeared"


def test_the_band_decides_and_is_log_symmetric():
    low, high = V.noise_band(MIN_EFFECT)
    assert low * high == pytest.approx(1.0) and high == pytest.approx(1.03)
    assert V.decide(0.99, 1.02, MIN_EFFECT) == V.SAME
    assert V.decide(1.031, 1.2, MIN_EFFECT) == V.SLOWER and V.decide(0.8, 0.97, MIN_EFFECT) == V.FASTER
    assert V.decide(0.98, 1.05, MIN_EFFECT) == V.UNDECIDED
    assert V.decide(math.nan, 1.0, MIN_EFFECT) == V.TOO_FEW


def test_process_summary_interval_sees_processes_and_is_reproducible():
    few = [[10.0] * 5, [12.0] * 5]
    summary = stats.process_summary(few)
    assert summary["median"] == pytest.approx(11.0) and summary["spread"] == pytest.approx(0.2)
    # Two processes: at least Student's t interval with one degree of freedom, far wider than their range.
    assert summary["ci_low"] < 9 and summary["ci_high"] > 13
    assert stats.process_summary(few) == summary
    one = stats.process_summary([[10.0, 11.0, 12.0, 10.5, 11.5]])
    assert one["processes"] == 1 and one["ci_low"] < 11.0 < one["ci_high"]


def test_the_hierarchical_bootstrap_resamples_processes_then_steps():
    rng = np.random.default_rng(4)
    draws = stats.bootstrap_medians([[1.0] * 4, [3.0] * 4], resamples=4000, seed=5)
    # Each draw picks two processes with replacement: (1,1), (1,3), (3,1), (3,3) give medians 1, 2, 2, 3.
    values, counts = np.unique(draws, return_counts=True)
    assert list(values) == [1.0, 2.0, 3.0]
    assert counts[1] / counts.sum() == pytest.approx(0.5, abs=0.03)
    del rng


def test_more_processes_go_where_the_noise_is():
    policy = NoisePolicy(min_processes=2, max_processes=5, max_spread=0.05, min_gpu_busy=None)
    levels = {"quiet": iter([10.0, 10.01, 10.02, 10.0, 10.0]), "noisy": iter([10.0, 15.0, 12.0, 9.0, 14.0])}
    calls = []

    def measure(keys, round_index):
        calls.append((round_index, tuple(keys)))
        return {k: {"steps": [next(levels[k])] * 3} for k in keys}

    clock = PhaseClock()
    results = measure_until_stable(measure, ["quiet", "noisy"], lambda r: r["steps"], policy,
                                   progress=lambda _: None, clock=clock)
    assert len(results["quiet"]) == 2 and len(results["noisy"]) == 5
    # The clock keeps each round's wall time: five rounds, the minimum being two.
    assert len(clock.rounds) == 5 and clock.min_processes == 2 and all(s >= 0 for s in clock.rounds)
    assert clock.record()["rounds_s"] == clock.rounds
    assert calls[0] == (0, ("quiet", "noisy")) and calls[-1] == (4, ("noisy",))
    assert spread([10.0, 15.0]) == pytest.approx(0.5)
    # A process that ended early (out of memory) is not repeated.
    assert not policy.wants_more([None]) and policy.wants_more([])
