"""Issue 31: every answer from the measure that answers it, and one story per configuration across
sections, on rows shaped like the quick preset's on an H200 (tests/quick_run.py)."""

from __future__ import annotations

import re

import pytest

from lmstudy.report.sections.labels import use_size_order
from lmstudy.report.sections.precision import answers as precision_answers
from lmstudy.report.sections.precision.findings import speedup_findings
from lmstudy.report.sections.timing import answers as timing_answers
from lmstudy.report.sections.timing.findings import findings as timing_findings
from lmstudy.report.sections.timing.tables import speedup_frame, speedup_table, warmup_table

from . import quick_run


def setup_module():
    use_size_order(["small", "medium", "large", "xl", "2.7B"])


def test_the_bf16_answer_states_the_gpu_time_speed_up_and_which_sizes_the_host_hides():
    timing = quick_run.timing()
    answer = precision_answers.speedup_answer(timing)
    # fp32's GPU busy time over bf16's: 564.8 / 147.8 and 28.52 / 10.74, computed from the rows.
    assert "On the GPU (its busy time per step), bf16 autocast is faster than fp32 by" in answer.text
    assert "2.7B: forward 6.41×, forward+backward 6.51×, training step 3.82× at context 256" in answer.text
    assert "small: forward 3.06×, forward+backward 3.25×, training step 2.66× at context 256" in answer.text
    assert "The host hides the GPU's gain in small, 2.7B" in answer.text
    # The optimizer's GPU time, the same in both precisions, is why the training step gains less.
    assert "71.8 ms in fp32 and 72.1 ms in bf16" in answer.text
    # The summary never states the flagged wall-time ratio without its GPU-time counterpart.
    assert answer.headline.startswith("bf16 autocast makes 2.7B's training step at context 256 3.82× as fast "
                                      "as fp32 on the GPU, 2.64× in wall time (host-bound or noisy")
    assert "GPU busy time within" in answer.trust


def test_the_bf16_findings_agree_with_the_answer_on_the_gpu_and_rank_no_flagged_wall_time():
    speedups = speedup_frame(quick_run.timing())
    said = [str(f) for f in speedup_findings(speedups)]
    assert said[0].startswith("On the GPU (fp32's busy time per step over bf16's), bf16 autocast is faster "
                              "in every one of the 9 configurations: small 1.95× to 3.25×; 2.7B 3.82× to "
                              "6.51×")
    assert not any("No bf16 speed-up is stated" in s for s in said)
    table = speedup_table(speedups)
    assert {"wall-time speed-up ×", "GPU-time speed-up ×", "GPU-time range ×"} <= set(table.columns)
    timing_said = " ".join(timing_findings(quick_run.timing()))
    assert re.search(r"Training step: no wall-time bf16 speed-up is ranked: .* on the GPU \(busy time\) "
                     r"bf16 is 1\.95–3\.82× as fast as fp32", timing_said)


def test_without_gpu_busy_time_the_bf16_answer_says_the_host_sets_the_wall_time():
    timing = quick_run.timing().drop(columns=["gpu_busy_ms", "gpu_busy_ms_processes", "gpu_busy_share"])
    answer = precision_answers.speedup_answer(timing)
    assert "On the GPU" not in answer.text
    assert "recorded no GPU busy time" in answer.text


def test_the_warm_up_answer_decides_from_the_gpu_bound_cells_as_its_finding_does():
    timing = quick_run.timing()
    answer = timing_answers.warmup_answer(timing)
    # Host-bound cells start 5.1% off (more than max_spread), GPU-bound ones 0.2%: the GPU-bound decide.
    assert ("After one warm-up step, steps 2 to 5 take 1.002× the steady window's median (steps 6 on) in "
            "the 3 configurations neither host-bound nor noisy") in answer.text
    assert "one warm-up step is enough (within 5.0%)." in answer.text
    assert "not enough" not in answer.text
    finding = next(f for f in timing_findings(timing) if f.startswith("Steps 2 to 5"))
    assert "1 warm-up step is enough" in finding and "median 1.002×" in finding


def test_the_warm_up_table_compares_windows_that_share_no_step():
    table = warmup_table(quick_run.timing())
    assert list(table.columns[4:]) == ["step 1 ms", "step 2 ms", "steps 3–5 ms", "steps 6–15 (steady) ms",
                                       "step 2 / steady ×", "steps 3–5 / steady ×", "flags"]
    row = table[(table["size"] == "2.7B") & (table["pass"] == "training step")
                & (table["precision"] == "fp32")]
    assert row["step 2 / steady ×"].iloc[0] == pytest.approx(1.001)


def test_the_compile_speed_up_tells_one_story_with_the_other_sections_eager_step():
    from lmstudy.report.sections.compile import across
    from lmstudy.report.sections.compile import answers as compile_answers
    from lmstudy.report.sections.compile.findings import findings as compile_findings
    from lmstudy.report.sections.compile.tables import comparison

    frame = quick_run.compile_rows()
    measurements = across.eager_measurements(frame, quick_run.timing(), quick_run.ladder_rows())
    assert list(measurements["source"]) == ["section 6 (this table)", "section 1 (timing)",
                                            "section 7 (ladder rung bf16)"]
    story = across.story(measurements, frame)
    answer = compile_answers.answers(comparison(frame), story, measurements)[0]
    # 54.78 / 29.25 and 68.8 / 29.25; section 6's interval (49.6–59.7) excludes section 1's (60.6–79.8).
    assert ("the training step of small 1.87–2.35× as fast as eager in wall time, against the eager step of "
            "sections 6, 1, 7 (which disagree beyond their intervals, by up to 26%; an interval covering "
            "them all: 1.58–2.94×)") in answer.text
    # Break-even against each eager time: 33.1 s over 39.55 ms saved, and over 25.53 ms.
    assert "it pays for itself after 837–1,297 steps" in answer.text
    assert answer.headline.startswith("torch.compile makes small's training step 1.87–2.35× as fast as eager "
                                      "(wall time, against the eager times of several sections, which "
                                      "disagree by up to 26%)")
    said = compile_findings(frame, measurements, story)
    assert said[0].startswith("The eager small ctx 256 bf16 training step, batch 4 was measured in 3 "
                              "sections: 54.8 ms (49.6–59.7) in section 6 (this table), 68.8 ms (60.6–79.8) "
                              "in section 1 (timing), 68.2 ms (63.5–71.9) in section 7 (ladder rung bf16). "
                              "Their intervals do not all overlap: the jobs disagree by up to 26%")


def test_with_gpu_busy_time_the_compile_story_gives_the_gpu_speed_up_too():
    from lmstudy.report.sections.compile import across

    frame = quick_run.compile_rows(gpu_busy=True)
    measurements = across.eager_measurements(frame, quick_run.timing(), quick_run.ladder_rows())
    story = across.story(measurements, frame)
    assert story["gpu_speedup"].iloc[0] == pytest.approx(10.7 / 7.9)


def test_the_ladder_never_ranks_overlapping_intervals_and_says_where_the_host_sets_the_step():
    from lmstudy.report.sections.ladder.findings import findings as ladder_findings
    from lmstudy.report.sections.ladder.tables import ladder_frame, ladder_table

    ladder = ladder_frame(quick_run.ladder_rows())
    table = ladder_table(ladder).set_index("rung")
    # bf16 + SDPA (35.9–66.6 ms) against bf16 (63.5–71.9 ms): the intervals overlap, so no rank.
    assert table.loc["bf16 + SDPA", "beyond noise"] == "no, intervals overlap"
    assert table.loc["bf16", "beyond noise"] == "yes"
    assert table.loc["bf16", "flags"] == "†" and table.loc["bf16", "95% CI ms"] == "63.5–71.9"
    assert round(table.loc["bf16", "GPU-time speed-up vs rung below ×"], 2) == 2.66
    said = [str(f) for f in ladder_findings(ladder)]
    assert ("small: bf16 + SDPA is within noise of the rung below (their intervals overlap): not ranked; "
            "bf16 + SDPA (on the GPU 1.13× faster).") in said
    assert any(s.startswith("small: bf16 is 1.13× slower than fp32 in wall time, but its step is host-bound "
                            "(†: the GPU busy 10.7 ms of 68.2)")
               and s.endswith("on the GPU it is 2.66× faster.")
               for s in said), said
