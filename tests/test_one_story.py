"""Issue 31: every answer from the measure that answers it, and one story per configuration across
sections, on rows shaped like the quick preset's on an H200 (tests/quick_run.py)."""

from __future__ import annotations

import re

import pytest

from lmstudy.analyse.trust import flag_rows
from lmstudy.report.labels import use_size_order
from lmstudy.sections.precision import answers as precision_answers
from lmstudy.sections.precision.findings import speedup_findings
from lmstudy.sections.timing import answers as timing_answers
from lmstudy.sections.timing.findings import findings as timing_findings
from lmstudy.sections.timing.tables import speedup_frame, speedup_table, warmup_table

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
    assert ("training step: small 0.97× in wall time against 2.66× on the GPU; 2.7B 2.64× in wall time "
            "against 3.82× on the GPU") in answer.text
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
    # The other 15 cells' own median, not the median over all 18 (review: "7.9%" was over all 27).
    assert "In the other 15 the second step is 5.6% off the steady median" in answer.text
    assert answer.headline.endswith("are 0.2% off steady (median; at most 0.2%).")
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
    from lmstudy.sections.compile import across
    from lmstudy.sections.compile import answers as compile_answers
    from lmstudy.sections.compile.findings import findings as compile_findings
    from lmstudy.sections.compile.tables import comparison

    frame = quick_run.compile_rows()
    measurements = across.eager_measurements(frame, quick_run.timing(), quick_run.ladder_rows())
    assert list(measurements["source"]) == ["section 6 (this table)", "section 1 (timing)",
                                            "section 7 (ladder rung bf16)"]
    story = across.story(measurements, frame)
    answer = compile_answers.answers(comparison(frame), story, measurements)[0]
    # 54.78 / 29.25 and 68.8 / 29.25; section 6's interval (49.6–59.7) excludes section 1's (60.6–79.8).
    assert ("the training step of small runs 1.87–2.35× as fast as eager in wall time, against the eager "
            "step of sections 6, 1, 7 (which disagree beyond their intervals, by up to 26%; an interval "
            "covering them all: 1.58–2.94×)") in answer.text
    # Break-even against each eager time: 33.1 s over 39.55 ms saved, and over 25.53 ms.
    assert ("small's training step pays for itself after 837–1,297 steps against its wall-time gain"
            in answer.text)
    assert answer.headline.startswith("torch.compile makes small's training step 1.87–2.35× as fast as eager "
                                      "(wall time, against the eager times of several sections, which "
                                      "disagree by up to 26%)")
    said = compile_findings(frame, measurements, story)
    assert said[0].startswith("The eager small ctx 256 bf16 training step, batch 4 was measured in 3 "
                              "sections: 54.8 ms (49.6–59.7) in section 6 (this table), 68.8 ms (60.6–79.8) "
                              "in section 1 (timing), 68.2 ms (63.5–71.9) in section 7 (ladder rung bf16). "
                              "Their intervals do not all overlap: the jobs disagree by up to 26%")


def test_with_gpu_busy_time_the_compile_story_gives_the_gpu_speed_up_too():
    from lmstudy.sections.compile import across

    frame = quick_run.compile_rows(gpu_busy=True)
    measurements = across.eager_measurements(frame, quick_run.timing(), quick_run.ladder_rows())
    story = across.story(measurements, frame)
    assert story["gpu_speedup"].iloc[0] == pytest.approx(10.7 / 7.9)


def test_the_ladder_never_ranks_overlapping_intervals_and_says_where_the_host_sets_the_step():
    from lmstudy.sections.ladder.findings import findings as ladder_findings
    from lmstudy.sections.ladder.tables import ladder_frame, ladder_table

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


def test_the_matmul_ceiling_is_measured_until_the_rate_stops_rising(monkeypatch):
    import torch

    from lmstudy.measure import matmul_ceiling

    # The H200's bursts: rising 566, 604, 633, 645, 653 ... then flat; each rate -> its burst's seconds.
    rates = iter([566.0, 604.0, 633.0, 645.0, 653.0, 690.0, 760.0, 781.0, 784.0, 786.0, 785.0, 783.0])
    flops = 2 * 64**3 * 20

    def burst(a, b, out, products, device):
        return flops / (next(rates) * 1e12) if products == 20 else 2 * 64**3 / 790e12

    monkeypatch.setattr(matmul_ceiling, "_burst_seconds", burst)
    monkeypatch.setattr(matmul_ceiling, "SHORT_PAUSE_S", 0.0)
    rows = matmul_ceiling.measure_ceiling([64], 0.0, 5, 20, torch.device("cpu"))
    sustained = [r["tflops"] for r in rows if r["kind"] == "sustained"]
    # Five fixed bursts stopped at 653 while still rising; it runs on until 5 lie within 1%.
    assert [round(t) for t in sustained] == [566, 604, 633, 645, 653, 690, 760, 781, 784, 786, 785, 783]
    assert [r["steady"] for r in rows if r["kind"] == "sustained"][-5:] == [True] * 5 and rows[0]["settled"]
    summary = matmul_ceiling.summarize(rows)
    assert round(summary["ceiling_tflops"]) == 784 and round(summary["short_burst_tflops"]) == 790


def test_the_ceiling_finding_names_the_sustained_rate_the_short_bursts_and_the_datasheet():
    import pandas as pd

    from lmstudy.analyse.ladder_table import ceilings
    from lmstudy.sections.ladder.findings import _ceiling

    rates = [566.0, 604.0, 633.0, 645.0, 653.0, 690.0, 760.0, 781.0, 784.0, 786.0, 785.0, 783.0]
    rows = [{"size": "small", "rung_key": "bf16", "n": 8192, "kind": "sustained", "burst": i,
             "products": 20, "tflops": t, "steady": i >= 7, "settled": True,
             "sm_clock_mhz": 1980.0 if i >= 7 else 1400.0,
             "max_sm_clock_mhz": 1980.0, "power_w": 650.0, "gpu": "NVIDIA H200"} for i, t in enumerate(rates)]
    rows += [{"size": "small", "rung_key": "bf16", "n": 8192, "kind": "short", "burst": i, "products": 1,
              "tflops": t, "steady": False, "settled": True, "gpu": "NVIDIA H200"}
             for i, t in enumerate([770.0, 790.0])]
    found = ceilings(pd.DataFrame(rows))
    assert found["ceiling_tflops"].iloc[0] == 784.0 and found["short_tflops"].iloc[0] == 790.0
    assert found["sm_clock_mhz"].iloc[0] == 1980.0  # read during the steady bursts, not over all of them
    (said,) = _ceiling(pd.DataFrame(rows))
    assert said.startswith("Measured dense bf16 matmul ceiling, sustained: 784 TFLOP/s (the median of the "
                           "last 5 bursts of 20 back-to-back products at n=8192, once the rate had stopped "
                           "rising, "
                           "within 1% of each other; 1 measurement) = 79.2% of the datasheet's 989.4 TFLOP/s "
                           "dense bf16 peak. Short bursts (one product after an idle pause, as a quick "
                           "benchmark times it) reach 790 TFLOP/s (79.8% of the datasheet peak)")
    assert "divide by the sustained rate; its MFU divides by the datasheet peak." in said


def _attention_rows():
    import pandas as pd

    # (implementation, precision, seq): forward median (interval), backward median (interval)
    cells = {("naive", "bf16", 16384): ((18.70, 18.5, 18.9), (20.78, 20.6, 21.0)),
             ("sdpa", "bf16", 16384): ((0.752, 0.36, 1.57), (1.872, 1.80, 1.95)),
             ("naive", "bf16", 1024): ((0.292, 0.25, 0.33), (0.55, 0.50, 0.60)),
             ("naive-compile", "bf16", 1024): ((0.512, 0.14, 1.86), (0.41, 0.20, 0.90))}
    rows = []
    for (impl, precision, seq), ((f, fl, fh), (b, bl, bh)) in cells.items():
        rows.append({"implementation": impl, "precision": precision, "head_dim": 64, "seq_len": seq,
                     "status": "ok", "forward_median_ms": f, "forward_ci_low_ms": fl,
                     "forward_ci_high_ms": fh,
                     "backward_median_ms": b, "backward_ci_low_ms": bl, "backward_ci_high_ms": bh,
                     "total_ms": f + b, "forward_process_spread": (fh - fl) / fl,
                     "backward_process_spread": 0.01,
                     "memory_before_backward_bytes": 1e9, "steps": 20, "first_call_ms": 900.0,
                     "sdpa_backend": "flash" if impl == "sdpa" else None})
    return flag_rows(pd.DataFrame(rows), quick_run.MIN_GPU_BUSY, quick_run.MAX_SPREAD)


def test_attention_ratios_carry_their_intervals_and_noise_is_not_ranked():
    from lmstudy.sections.attention import answers as attention_answers
    from lmstudy.sections.attention.findings import _speedups
    from lmstudy.sections.attention.tables import compile_table, main_table

    frame = _attention_rows()
    said = " ".join(_speedups(frame))
    # SDPA's forward at seq 16384 (0.36–1.57 ms) against naive's 18.5–18.9: 24.87× with its interval.
    assert "forward 24.87× faster (interval 11.8–52.5×)" in said
    compiled = attention_answers.compile_answer(frame)
    assert compiled.text.startswith("Compiled and eager naive attention are not told apart in any of the 1 "
                                    "configuration")
    assert "0.85" not in compiled.text or "not told apart" in compiled.text
    table = compile_table(frame)
    assert table["forward 95% CI ×"].iloc[0].endswith("(overlap)")
    main = main_table(frame)
    assert "SDPA fwd 95% CI ms" in main.columns and main["SDPA fwd 95% CI ms"].str.endswith("‡").any()


def test_the_timing_section_names_the_thresholds_and_why_two_processes_give_a_wide_interval():
    from lmstudy.report.render import display_frame
    from lmstudy.sections.timing.section import marks_text
    from lmstudy.sections.timing.tables import main_table

    text = marks_text(quick_run.timing())
    assert "less than 85% (noise.min_gpu_busy)" in text and "more than 5% (noise.max_spread)" in text
    assert "(largest − smallest) / smallest of the fresh processes' medians" in text
    assert ("2.7B ctx 256 forward+backward bf16's two processes differ by 3.0%, its interval is 109–161 ms "
            "(±20%)") in text
    # Two processes 66% apart get a far wider interval, but they do not "agree closely": never the example.
    timing = quick_run.timing()
    noisy = (timing["size"] == "small") & (timing["context_length"] == 256) & (timing["pass"] == "forward") \
        & (timing["precision"] == "fp32")
    timing.loc[noisy, ["process_spread", "ci_low_ms", "ci_high_ms", "noisy"]] = [0.663, 0.722, 464.0, True]
    assert "differ by 3.0%" in marks_text(timing) and "66.3%" not in marks_text(timing)
    shown = display_frame(main_table(quick_run.timing()))
    assert list(shown.columns).index("flags") == list(shown.columns).index("median (ms)") + 1


def test_each_section_says_what_the_run_did_not_measure():
    from lmstudy.report import coverage

    timing = quick_run.timing()
    said = coverage.not_measured("timing", {"sizes": timing["size"].astype(str),
                                            "context_lengths": timing["context_length"],
                                            "passes": timing["pass"].astype(str),
                                            "precisions": timing["precision"]})
    assert said == ("Not measured in this run, though the full study (config.yaml, preset full) has them: "
                    "sizes medium, large, xl; context lengths 512, 1024.")
    compiled = quick_run.compile_rows()
    said = coverage.not_measured("compile", {"sizes": compiled["size"],
                                             "context_length": compiled["context_length"],
                                             "passes": compiled["pass"], "precisions": compiled["precision"]})
    assert "sizes medium, large, xl, 2.7B; context length 512; passes forward; precisions fp32" in said


def test_the_environment_says_when_another_run_measured_on_the_host_at_the_same_time(tmp_path):
    import pandas as pd

    from lmstudy.analyse.study_cost import shared_host

    def jobs(spans):
        return pd.DataFrame([{"section": "timing", "rule": "time_model", "job": f"j{a}", "wall_s": b - a,
                              "measuring": True, "host": "h200", "started_at": a, "ended_at": b,
                              "foreign_processes": ""} for a, b in spans])

    mine = jobs([(0, 10), (10, 20), (30, 40)])
    (tmp_path / "qa").mkdir()
    assert shared_host(tmp_path / "qa", mine) == "not known: no other run's job records lie beside this one"
    (tmp_path / "qb" / "cost").mkdir(parents=True)
    jobs([(5, 12), (41, 50)]).to_csv(tmp_path / "qb" / "cost" / "jobs.csv", index=False)
    assert shared_host(tmp_path / "qa", mine) == ("2 of 3 measuring jobs ran while a measuring job of run qb "
                                                  "ran on the same host")


def test_scale_and_mask_holds_no_memory_copies_they_are_named_apart():
    import pandas as pd

    from lmstudy.analyse.nsys import tables as nsys_tables
    from lmstudy.sections.nsys import answers as nsys_answers

    base = {"size": "small", "context_length": 256, "pass": "forward", "phase": "forward",
            "profiled_steps": 1, "batch_size": 4, "num_heads": 12, "d_model": 768, "instances": 1, "path": ""}
    # The review's H200 forward at ctx 256: div 0.111, masked_fill 0.065, bitwise_not 0.017 ms, and a
    # device-to-device copy (0.065) and a copy kernel (0.050) in the matmul ranges.
    kernels = pd.DataFrame([{**base, **r} for r in (
        {"range": "computing attention scores", "kernel": "gemm", "category": "GEMM", "total_ns": 206e3},
        {"range": "final matmul", "kernel": "gemm", "category": "GEMM", "total_ns": 199e3},
        {"range": "computing attention scores", "kernel": "div", "category": "elementwise",
         "total_ns": 111e3},
        {"range": "computing attention scores", "kernel": "masked_fill", "category": "elementwise",
         "total_ns": 65e3},
        {"range": "computing attention scores", "kernel": "bitwise_not", "category": "elementwise",
         "total_ns": 17e3},
        {"range": "computing attention scores", "kernel": "[CUDA memcpy Device-to-Device]",
         "category": "memory copy/set", "total_ns": 65e3},
        {"range": "final matmul", "kernel": "direct_copy_kernel_cuda", "category": "memory copy/set",
         "total_ns": 50e3},
        {"range": "computing softmax", "kernel": "softmax", "category": "softmax", "total_ns": 113e3},
    )])
    row = nsys_tables.attention_table(kernels).iloc[0]
    assert row["scale and mask ms"] == pytest.approx(0.193)
    assert row["copies in the matmul ranges ms"] == pytest.approx(0.115)
    assert row["non-matmul/matmul time"] == pytest.approx((0.113 + 0.193 + 0.115) / 0.405)
    answer = nsys_answers.attention_answer(kernels)
    assert "Counting the scaling and the mask (0.193 ms) and the memory copies in the two matmuls' ranges " \
           "(0.115 ms: [CUDA memcpy Device-to-Device], direct_copy_kernel_cuda) with it" in answer.text


def test_the_largest_allocations_give_the_requested_size_beside_the_allocator_block(tmp_path):
    import pandas as pd

    from lmstudy.sections.memory import answers as memory_answers
    from lmstudy.sections.memory.tables import largest_table

    folder = tmp_path / "memory" / "summary" / "small_ctx256_forward_fp32"
    folder.mkdir(parents=True)
    logits = 4 * 256 * 10000 * 4  # 39.06 MiB, in a 40 MiB block
    pd.DataFrame([{"size_bytes": 40 * 2**20, "requested_bytes": logits, "count": 1,
                   "total_bytes": 40 * 2**20, "phases": "forward", "kinds": "activations",
                   "source": "model.py:80",
                   "stack": "model.py:80", "code": "return F.linear(x, self.weight)"}]).to_csv(
        folder / "largest_allocations.csv", index=False)
    frame = pd.DataFrame([{"size": "small", "context_length": 256, "pass": "forward",
                           "precision": "fp32", "summary_dir": "memory/summary/small_ctx256_forward_fp32"}])
    answer = memory_answers.largest_answer(tmp_path, frame)
    assert "39.1 MiB (in a 40 MiB allocator block) × 1 by return F.linear" in answer.text
    table = largest_table(tmp_path, frame.iloc[0])
    assert table[["block MiB", "requested MiB"]].iloc[0].tolist() == [40.0, logits / 2**20]


def test_the_residual_stream_is_given_for_the_full_studys_2_7b_model_too():
    import pandas as pd

    from lmstudy.sections.memory import answers as memory_answers

    rows = pd.DataFrame([{"size": "small", "context_length": 256, "batch_size": 4, "d_model": 768,
                          "residual_dtype": "float32", "residual_stream_bytes": 4 * 256 * 768 * 4}])
    answer = memory_answers.residual_answer(rows)
    assert "small (batch 4, d_model 768): 3 MiB (ctx 256, float32)." in answer.text
    assert ("For the full study's 2.7B, which this run did not profile, the same product (batch 4, float32) "
            "gives 2.7B (d_model 2560): 5 MiB (ctx 128) / 10 MiB (ctx 256) / 20 MiB (ctx 512).") \
        in answer.text


def test_the_attention_oom_point_is_given_for_an_80_gb_gpu_too():
    import pandas as pd

    from lmstudy.sections.attention.findings import _oom_threshold

    measured = pd.DataFrame([{"implementation": "naive", "precision": "fp32", "head_dim": 64,
                              "batch_size": 8, "device_memory_bytes": 150_100_000_000}])
    (said,) = _oom_threshold(measured, 64 * 2**20)
    assert said.startswith("By that accounting (and the constant) naive fp32 attention at batch 8, d=64 "
                           "outgrows the 140 GiB available from sequence length 65536 (power of two) on; a "
                           "GPU of 80 GB (79.2 GiB) from 32768")


def test_the_toy_models_logits_are_one_tensor_and_the_rmsnorm_row_claims_no_more_than_it_computes():
    import pandas as pd

    from lmstudy.sections.precision import answers as precision_answers
    from lmstudy.sections.precision.findings import _autocast_dtypes

    tensors = [("parameter fc1.weight", "float32"), ("output of fc1 (Linear)", "float16"),
               ("output of relu (ReLU)", "float16"), ("output of ln (LayerNorm)", "float32"),
               ("output of fc2 (Linear)", "float16"), ("logits", "float16"), ("loss", "float32"),
               ("gradient of fc1.weight", "float32")]
    frame = pd.DataFrame([{"precision": "fp16", "tensor": t, "dtype": d, "device": "cuda", "note": ""}
                          for t, d in tensors])
    (said,) = _autocast_dtypes(frame)
    assert ("3 tensors are computed in lower precision (output of fc1 (Linear), output of relu (ReLU), "
            "output of fc2 (Linear) (the logits))") in said
    assert precision_answers.AS_MODEL_SHOWN.startswith("fp32 inside, input and output rounded")


def test_finding_csvs_are_named_by_what_they_hold_not_by_position(tmp_path):
    from lmstudy.report.render import Findings, Section, render

    timing = quick_run.timing()
    said = [f for f in timing_findings(timing) if "wall-time bf16 speed-up" in f]
    assert len(said) == 3
    render([Section("timing", "T", [Findings(said)])], {"gpu": "X"}, quick_run.REPO / "workflow/templates",
           tmp_path, "T", "r")
    names = sorted(p.name for p in (tmp_path / "tables").glob("finding_*.csv"))
    assert names == ["finding_timing_speedups_forward.csv", "finding_timing_speedups_forward_backward.csv",
                     "finding_timing_speedups_train_step.csv"]


def test_numbers_in_one_column_share_one_format():
    from lmstudy.report.render import column_formatter, formatter
    from lmstudy.sections.timing.tables import main_table, mfu_table

    write = column_formatter([9.92e-4, 12.5, 3.1])
    assert [write(v) for v in (9.92e-4, 12.5, 3.1)] == ["9.92e-04", "1.25e+01", "3.10e+00"]
    mfu = mfu_table(quick_run.timing().assign(mfu=0.1069, peak_tflops=989.4, mfu_peak="bf16"))
    columns = [c for c in mfu.columns if c.startswith("ctx")]
    assert columns == ["ctx 128 (%)", "ctx 256 (%)"]
    write = formatter(columns[0], [10.694, 17.37, 0.588])
    assert [write(v) for v in (10.694, 17.37, 0.588)] == ["10.7", "17.4", "0.6"]
    intervals = main_table(quick_run.timing())["95% CI ms"].tolist()
    assert {"11.0–21.0", "44.0–66.6", "500.0–504.0"} <= set(intervals)  # never 11–21 beside 44–66.6


def test_no_sentence_says_1_of_1():
    from lmstudy.report.answers import of_all

    assert [of_all(1, 1, "configuration"), of_all(2, 2, "cell"), of_all(3, 3, "cell"), of_all(1, 3, "cell")] \
        == ["the one configuration", "both cells", "all 3 cells", "1 of 3 cells"]
    answer = timing_answers.forward_backward_answer(quick_run.timing())
    assert "6 of 9 cells host-bound (the GPU busy for less than 85% of the step" in answer.text
