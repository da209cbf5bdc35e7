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


# Verdicts per measure (issue 30): wall time, GPU time, kernels per step, flags and a reading.

NOISE = V.Noise(min_gpu_busy=0.85, max_spread=0.05, gpu_agreement=0.008, gpu_min_effect=0.015,
                 compiled_agreement=0.13)


def side(steps_ms, gpu_ms=(), kernels=float("nan")) -> dict:
    """One side of a joined row as tables.measures reads it: step samples per process, GPU ms per process."""
    import json
    return {"status": "ok", "step_times_ms": json.dumps([list(p) for p in steps_ms]),
            "median_ms": float(np.median([np.median(p) for p in steps_ms])),
            "gpu_busy_ms_processes": json.dumps(list(gpu_ms)) if gpu_ms else None,
            "gpu_busy_ms": float(np.median(gpu_ms)) if gpu_ms else None, "kernels_per_step": kernels}


def judged(pairs):
    """tables.judge over rows given as (A's side, B's side)."""
    import pandas as pd

    from lmstudy.analyse.compare import tables as T

    rows = []
    for i, (a, b) in enumerate(pairs):
        joined = {"row": i, **{f"{k}_a": v for k, v in a.items()}, **{f"{k}_b": v for k, v in b.items()}}
        out = {"row": i, "status_a": "ok", "status_b": "ok", "presence": "",
               "median_ms_a": a["median_ms"], "median_ms_b": b["median_ms"]}
        for s in ("a", "b"):
            out.update(T.measures(pd.Series(joined), s, "step_times_ms"))
        rows.append(out)
    return T.judge(pd.DataFrame(rows), MIN_EFFECT, NOISE)


def steps(*levels, n=10, jitter=0.005, seed=0):
    rng = np.random.default_rng(seed)
    return [list(level * np.exp(rng.normal(0, jitter, n))) for level in levels]


def test_a_host_bound_row_with_the_same_gpu_work_reads_so():
    # Wall time wanders between processes (12 and 20 ms humps), the GPU's 3 ms agree within 0.2%.
    a = side(steps(12.0, 20.0, seed=1), gpu_ms=(3.000, 3.004), kernels=400)
    b = side(steps(19.0, 12.5, seed=2), gpu_ms=(3.002, 2.999), kernels=400)
    row = judged([(a, b)]).iloc[0]
    assert row["host_bound_a"] and row["host_bound_b"] and row["noisy_a"]
    assert (row["verdict"], row["gpu_verdict"], row["kernels_verdict"]) == (V.UNDECIDED, V.SAME, V.EQUAL)
    assert row["reading"] == "same GPU work, host time undecided: host-bound, noisy"


def test_gpu_time_of_one_process_a_side_is_judged_by_the_agreement_between_processes():
    # Runs made before every process recorded the GPU's time: one value a row (gpu_busy_ms).
    def row(ratio):
        a = side(steps(100.0, 100.1), kernels=900)
        b = side(steps(100.0 * ratio, 100.1 * ratio), kernels=900)
        a["gpu_busy_ms"], b["gpu_busy_ms"] = 95.0, 95.0 * ratio
        return a, b

    rows = judged([row(1.0), row(1.005), row(1.012), row(1.03), row(1.10)])
    # GPU time's own band (1.5%), not wall time's (3%): 1.012 +- 0.8% straddles its edge, 1.03 is past it.
    assert list(rows["gpu_verdict"]) == [V.SAME, V.SAME, V.UNDECIDED, V.SLOWER, V.SLOWER]
    assert list(rows["verdict"])[:3] == [V.SAME] * 3 and rows["verdict"].iloc[3] == V.UNDECIDED
    # 0.8% one process against one: the interval of B/A is the ratio times 1 -+ 0.8%.
    assert rows["gpu_ci_high"].iloc[4] / rows["gpu_ratio"].iloc[4] == pytest.approx(1.008, rel=1e-6)
    assert not rows["host_bound_a"].any()  # 95 of 100 ms busy
    assert rows["reading"].iloc[4] == "GPU time slower, wall time slower"
    assert rows["reading"].iloc[3] == "GPU time slower, wall time undecided"
    # A run made before repetition: its wall time is not judged, its GPU time still is.
    old = (side([[100.0, 100.2, 99.9]]), side([[110.0, 110.1, 110.2]]))
    old[0]["gpu_busy_ms"], old[1]["gpu_busy_ms"] = 95.0, 104.5
    row = judged([old]).iloc[0]
    assert (row["verdict"], row["gpu_verdict"]) == (V.ONE_PROCESS, V.SLOWER)
    assert row["reading"] == "GPU time slower, wall time not judged (one process)"


def test_kernel_counts_are_equal_or_not_and_a_cpu_run_rests_on_wall_time():
    gpu = side(steps(10.0, 10.01), gpu_ms=(9.5, 9.5), kernels=120)
    more = side(steps(10.0, 10.01), gpu_ms=(9.5, 9.5), kernels=121)
    cpu_a, cpu_b = side(steps(10.0, 10.02)), side(steps(40.0, 40.1))
    rows = judged([(gpu, more), (cpu_a, cpu_b)])
    assert list(rows["kernels_verdict"]) == [V.DIFFERS, V.TOO_FEW]
    assert rows["reading"].iloc[0] == "same GPU time, other kernels, wall time same"
    assert rows["gpu_verdict"].iloc[1] == V.TOO_FEW and rows["verdict"].iloc[1] == V.SLOWER
    assert rows["reading"].iloc[1] == "wall time slower (no GPU time)"


def test_a_row_in_two_humps_is_not_called_once_its_regime_shows_the_humps():
    # A's two processes in the lower hump, B's in the upper, 1.7x apart: alone, Welch's interval
    # over the four medians is narrow and calls it slower. Beside 20 rows of the same regime whose
    # processes fall in either hump, the pooled interval knows the humps and does not.
    lone = (side(steps(10.0, 10.2, seed=3)), side(steps(17.0, 17.3, seed=4)))
    assert judged([lone])["verdict"].iloc[0] == V.SLOWER
    rng = np.random.default_rng(5)
    others = [(side(steps(*(10.0 * 1.7 ** rng.integers(0, 2, 2)), seed=10 + i)),
               side(steps(*(10.0 * 1.7 ** rng.integers(0, 2, 2)), seed=50 + i))) for i in range(20)]
    rows = judged([lone, *others])
    assert rows["pooled"].all()
    assert rows["verdict"].iloc[0] == V.UNDECIDED
    # A four-fold change is still called through the same pool.
    four = (side(steps(10.0, 17.0, seed=6)), side(steps(40.0, 68.0, seed=7)))
    assert judged([four, *others])["verdict"].iloc[0] == V.SLOWER


def test_the_pool_borrows_only_from_rows_of_the_same_regime():
    # Quiet GPU-bound rows do not narrow the interval of a host-bound row: its regime has one row,
    # too few to pool, so it keeps its own (Welch's) interval.
    quiet = [(side(steps(100.0, 100.1, seed=i), gpu_ms=(99.0, 99.0)),
              side(steps(100.0, 100.1, seed=i + 30), gpu_ms=(99.0, 99.0))) for i in range(20)]
    host = (side(steps(10.0, 15.0, seed=8), gpu_ms=(2.0, 2.0)),
            side(steps(12.0, 16.0, seed=9), gpu_ms=(2.0, 2.0)))
    rows = judged([host, *quiet])
    assert rows["host_bound_a"].iloc[0] and not rows["host_bound_a"].iloc[1:].any()
    assert not rows["pooled"].iloc[0] and rows["pooled"].iloc[1:].all()
    assert rows["verdict"].iloc[0] == V.UNDECIDED and (rows["verdict"].iloc[1:] == V.SAME).all()


def test_pooled_half_width_is_the_quantile_of_the_mean_of_m_differences():
    # A pool of differences +-d only: the mean of 2 is 0 or +-d, |.| = d with probability 1/2, so
    # its 95% quantile is d; the mean of 1 is always d.
    pool = np.array([0.2, -0.2] * 20 + [np.nan] * 5)
    assert stats.pooled_half_width(pool, 1, resamples=4000) == pytest.approx(0.2)
    assert stats.pooled_half_width(pool, 2, resamples=4000) == pytest.approx(0.2)
    # With 4, |mean| is d only when all four agree in sign (1/8): the 95% quantile is d, the 80% d/2.
    assert stats.pooled_half_width(pool, 4, confidence=0.8, resamples=4000) == pytest.approx(0.1)
    assert np.isnan(stats.pooled_half_width(np.full(4, np.nan), 2))


def test_gpu_time_from_every_process_decides_where_wall_time_cannot():
    # 27 host-bound rows: wall time in two humps 1.7x apart, the GPU's busy time per process within
    # 0.3% (issue 30: it agreed within 0.8% between runs in every cell). A/A: the GPU time is the same
    # in every row; batch 10 against 9 (11% more GPU work): slower in every row, which the host's
    # time hides (its false alarms are tests/test_compare_false_alarms.py's to count).
    rng = np.random.default_rng(11)

    def row(work, seed, spread=0.003):
        humps = 10.0 * 1.7 ** rng.integers(0, 2, 3)
        gpu = 3.0 * work * np.exp(rng.normal(0, spread, 3))
        return side(steps(*humps, seed=seed), gpu_ms=tuple(gpu), kernels=250)

    same = judged([(row(1.0, i), row(1.0, 100 + i)) for i in range(27)])
    more = judged([(row(1.0, i), row(10 / 9, 200 + i)) for i in range(27)])
    assert (same["gpu_verdict"] == V.SAME).all() and (more["gpu_verdict"] == V.SLOWER).all()
    assert same["reading"].str.startswith("same GPU work, host time ").all()
    hidden = more[more["verdict"] == V.UNDECIDED]
    assert len(hidden) > len(more) / 2
    assert (hidden["reading"].str.startswith(
        "GPU time slower, host time undecided (the host hides the GPU's change): host-bound")).all()
    # The GPU time's interval comes from the per-process values pooled, not from the agreement
    # setting: processes that agree five times less closely give an interval about five times wider.
    looser = judged([(row(1.0, i, 0.015), row(1.0, 300 + i, 0.015)) for i in range(27)])
    width = {name: np.log(f["gpu_ci_high"] / f["gpu_ci_low"]).median() for name, f in
             (("tight", same), ("loose", looser))}
    assert 3 < width["loose"] / width["tight"] < 8
