"""How far to trust a timing row: flags and physics on hand-made tables (lmstudy.analyse.trust)."""

import pandas as pd

from lmstudy.analyse.trust import flag_rows, marks, overlap, physics_violations, trusted
from lmstudy.sections.timing.findings import findings


def _row(pass_name, median, low=None, high=None, **extra):
    return {"size": "small", "context_length": 128, "precision": "fp32", "variant": "naive",
            "pass": pass_name, "median_ms": median, "ci_low_ms": low if low is not None else median * 0.99,
            "ci_high_ms": high if high is not None else median * 1.01, "status": "ok", **extra}


def test_flags_follow_the_thresholds():
    frame = pd.DataFrame([
        _row("forward", 10, gpu_busy_share=0.5, process_spread=0.01),
        _row("forward_backward", 30, gpu_busy_share=0.95, process_spread=0.2),
        _row("train_step", 40, gpu_busy_share=None, process_spread=None),
    ])
    flagged = flag_rows(frame, min_gpu_busy=0.85, max_spread=0.05)
    assert list(flagged["host_bound"]) == [True, False, False]
    assert list(flagged["noisy"]) == [False, True, False]
    assert [marks(r) for _, r in flagged.iterrows()] == ["†", "‡", ""]
    assert list(trusted(flagged)["pass"]) == ["train_step"]


def test_attention_rows_are_flagged_host_bound_from_each_part():
    # The quick report at b9d9ffa (review M5): naive-compile bf16 seq 1024, forward 0.027 ms busy of
    # 0.283 ms (9%), was never flagged: its GPU time sits in forward_/backward_ columns. Real row values.
    frame = pd.DataFrame([
        {"implementation": "naive-compile", "seq_len": 1024, "status": "ok", "forward_median_ms": 0.283,
         "forward_gpu_busy_ms": 0.027, "backward_median_ms": 0.40, "backward_gpu_busy_ms": 0.38,
         "forward_process_spread": 0.01, "backward_process_spread": 0.01},
        {"implementation": "naive", "seq_len": 16384, "status": "ok", "forward_median_ms": 30.1,
         "forward_gpu_busy_ms": 30.0, "backward_median_ms": 61.0, "backward_gpu_busy_ms": 60.9,
         "forward_process_spread": 0.001, "backward_process_spread": 0.001},
        {"implementation": "naive", "seq_len": 65536, "status": "OOM", "forward_median_ms": None,
         "forward_gpu_busy_ms": None, "backward_median_ms": None, "backward_gpu_busy_ms": None},
    ])
    flagged = flag_rows(frame, min_gpu_busy=0.85, max_spread=0.05)
    assert list(flagged["host_bound"]) == [True, False, False]
    assert list(flagged["forward_host_bound"]) == [True, False, False]
    assert list(flagged["backward_host_bound"]) == [False, False, False]
    assert [marks(r) for _, r in flagged.iterrows()] == ["†", "", ""]


def test_a_training_step_faster_than_forward_backward_is_a_violation():
    frame = pd.DataFrame([_row("forward", 10), _row("forward_backward", 40), _row("train_step", 30)])
    violations = physics_violations(frame, ["size", "context_length", "precision", "variant"])
    assert len(violations) == 1
    row = violations.iloc[0]
    assert (row["pass"], row["contains"]) == ("train_step", "forward_backward")
    assert bool(row["beyond_intervals"])


def test_a_violation_inside_the_intervals_is_noise_and_said_so():
    frame = pd.DataFrame([_row("forward", 10), _row("forward_backward", 40, 30, 50),
                          _row("train_step", 39, 35, 45)])
    violations = physics_violations(frame, ["size", "context_length", "precision", "variant"])
    assert len(violations) == 1 and not violations.iloc[0]["beyond_intervals"]
    table = frame.assign(warmup_steps=5, timed_steps=10, mfu=None, achieved_tflops=None, processes=2)
    sentences = " ".join(findings(table))
    assert "Noise, not physics" in sentences and "within the intervals" in sentences


def test_a_consistent_table_has_no_violation():
    frame = pd.DataFrame([_row("forward", 10), _row("forward_backward", 30), _row("train_step", 35)])
    assert physics_violations(frame, ["size", "context_length", "precision", "variant"]).empty


def test_intervals_that_overlap_cannot_be_ranked():
    assert overlap(1, 2, 1.5, 3) and overlap(1, 2, float("nan"), 3)
    assert not overlap(1, 2, 2.5, 3)
