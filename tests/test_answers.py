"""The answers to the course's questions and the report's summary, from hand-made tables whose
answers are known by heart (no torch: the report side)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lmstudy.analyse.nsys import tables as nsys_tables
from lmstudy.report.answers import Answer, Answers
from lmstudy.report.labels import column_label, in_size_order, use_size_order
from lmstudy.report.render import Section, Table, render, short_texts
from lmstudy.sections.memory.tables import phase_peak_table
from lmstudy.sections.nsys import answers as nsys_answers
from lmstudy.sections.precision import answers as precision_answers
from lmstudy.sections.timing import answers as timing_answers

from .conftest import REPO


def _row(size, ctx, pass_name, precision, median, warmup=2, **extra):
    return {
        "size": size,
        "context_length": ctx,
        "pass": pass_name,
        "precision": precision,
        "variant": "naive",
        "warmup_steps": warmup,
        "timed_steps": 3,
        "status": "ok",
        "median_ms": median,
        "cv": 0.02,
        "trajectory_ms": json.dumps([median * 4, median * 1.1, median, median, median]),
        **extra,
    }


def test_backward_is_forward_backward_minus_forward_and_host_bound_cells_are_left_out():
    rows = [
        _row("small", 128, "forward", "fp32", 10.0, ci_low_ms=9.0, ci_high_ms=11.0, host_bound=True),
        _row(
            "small", 128, "forward_backward", "fp32", 50.0, ci_low_ms=45.0, ci_high_ms=55.0, host_bound=True
        ),
        _row("big", 128, "forward", "fp32", 100.0, ci_low_ms=99.0, ci_high_ms=101.0, host_bound=False),
        _row(
            "big", 128, "forward_backward", "fp32", 300.0, ci_low_ms=297.0, ci_high_ms=303.0, host_bound=False
        ),
    ]
    use_size_order(["small", "big"])
    answer = timing_answers.forward_backward_answer(timing_answers_frame(rows))
    # big's backward is 200 ms = 2.00x its forward; small's (4x) is host-bound and left out.
    assert (
        "takes 2.00× the forward over 1 configuration, leaving out 1 host-bound or noisy ones" in answer.text
    )
    assert "10 ms (95% interval 9–11) (small) to 100 ms (95% interval 99–101) (big)" in answer.text
    assert "1 of 4 cells host-bound" not in answer.text and "2 of 4 cells host-bound" in answer.text


def timing_answers_frame(rows):
    frame = pd.DataFrame(rows)
    frame["size"] = pd.Categorical(frame["size"], categories=["small", "big"], ordered=True)
    return frame


def test_without_the_between_process_columns_trust_comes_from_the_cv():
    rows = [_row("small", 128, "forward", "fp32", 10.0), _row("small", 128, "forward_backward", "fp32", 30.0)]
    answer = timing_answers.forward_backward_answer(timing_answers_frame(rows))
    assert "takes 2.00× the forward over 1 configuration." in answer.text
    assert "one process each: step-to-step CV 2.0%" in answer.text


def test_warm_up_compares_single_steps_not_overlapping_windows():
    rows = [_row("small", 128, "forward", "fp32", 10.0), _row("small", 256, "forward", "fp32", 20.0)]
    answer = timing_answers.warmup_answer(timing_answers_frame(rows))
    assert answer.text.startswith("Without warm-up the first step takes 4.0× the steady median")
    assert "After one warm-up step, step 2 takes 1.100× the steady window's median" in answer.text


def test_warm_up_reads_the_trajectory_of_every_process():
    # A row measured in several processes holds one trajectory per process (lmstudy.measure.repeat).
    rows = [
        _row(
            "small", 128, "forward", "fp32", 10.0,
            trajectory_ms=json.dumps([[30.0, 11.0, 10.0, 10.0], [50.0, 11.0, 10.0], [40.0, 11.0, 10.0]]),
        )
    ]
    answer = timing_answers.warmup_answer(timing_answers_frame(rows))
    assert answer.text.startswith("Without warm-up the first step takes 4.0× the steady median")
    assert "After one warm-up step, step 2 takes 1.100× the steady window's median" in answer.text


def test_the_peak_answer_says_where_the_peak_is_and_which_contexts_were_measured():
    from lmstudy.sections.memory import answers as memory_answers

    phases = pd.DataFrame(
        [
            {"size": "small", "context": 256, "pass": "forward", "precision": "fp32",
             "step peak GiB": 0.557, "forward peak GiB": 0.557, "peak in phase": "forward"},
            {"size": "small", "context": 256, "pass": "training step", "precision": "fp32",
             "step peak GiB": 2.71, "forward peak GiB": 2.67, "peak in phase": "backward"},
        ]
    )
    answer = memory_answers.peak_answer(phases)
    assert "peak comes early in the backward phase, while the activations forward saved" in answer.text
    # One context: "in the backward phase", never "in 1 of 1" (review W8).
    assert "peak 2.71 GiB, in the backward phase; its forward phase alone 2.67 GiB" in answer.text
    assert " of 1" not in answer.text
    assert "Only context 256 was measured in this run (memory.context_lengths in config.yaml)" in answer.text


def test_the_speed_up_answer_names_the_host_bound_cells_it_quotes():
    rows = [
        _row("small", 256, "train_step", "fp32", 54.1, warmup=5, host_bound=True),
        _row("small", 256, "train_step", "bf16", 61.8, warmup=5, host_bound=True),
        _row("2.7B", 256, "train_step", "fp32", 577.3, warmup=5, host_bound=False),
        _row("2.7B", 256, "train_step", "bf16", 243.3, warmup=5, host_bound=True),
    ]
    frame = pd.DataFrame(rows)
    frame["size"] = pd.Categorical(frame["size"], categories=["small", "2.7B"], ordered=True)
    answer = precision_answers.speedup_answer(frame)
    assert "bf16 autocast runs the training step 2.37× as fast as fp32 for 2.7B at context 256" in answer.text
    assert answer.text.endswith("Host-bound or noisy there (†‡): small, 2.7B; the wall-time ratio tells the "
                                "host's overhead more than the GPU's arithmetic, and this run recorded no "
                                "GPU busy time to tell it.")


def test_the_model_table_counts_parameters_with_and_without_the_input_embedding():
    frame = pd.DataFrame(
        [
            {
                "size": "small",
                "d_model": 768,
                "d_ff": 3072,
                "num_layers": 12,
                "num_heads": 12,
                "vocab_size": 10000,
                "batch_size": 4,
                "params": 128_625_408,
            }
        ]
        * 3
    )
    table = timing_answers.model_table(frame)
    assert len(table) == 1
    assert table["parameters (M)"].iloc[0] == "129"  # three significant digits
    # A run that recorded no count of the parameters in matrix products: the token embedding out, said so.
    assert table["without the token embedding (M)"].iloc[0] == "121"


def test_the_model_table_gives_each_contexts_parameters_where_they_differ_and_those_in_matrix_products():
    """A model with learned positions (tests/fixtures/models/encoder_lm.py) has more parameters at a
    longer context; the N of 6N leaves out every embedding, positions too, and every norm."""
    base = {"size": "tiny", "d_model": 32, "d_ff": 64, "num_layers": 2, "num_heads": 4, "vocab_size": 64,
            "batch_size": 2}
    frame = pd.DataFrame([{**base, "context_length": 16, "params": 19_648, "matmul_params": 18_688},
                          {**base, "context_length": 32, "params": 20_160, "matmul_params": 18_688}])
    table = timing_answers.model_table(frame)
    assert table["parameters (M)"].iloc[0] == "0.0196 (ctx 16), 0.0202 (ctx 32)"
    assert table["in matrix products (M)"].iloc[0] == "0.0187"
    assert "without the token embedding (M)" not in table


def test_what_would_not_fit_is_shown_only_for_a_gpu_larger_than_80_gb():
    gib = 2**30
    rows = [
        _row("xl", 1024, "train_step", "bf16", 1.0, peak_reserved_bytes=77.0 * gib),  # within 5% of 79.2
        _row("2.7B", 1024, "train_step", "fp32", 1.0, peak_reserved_bytes=88.0 * gib),  # does not fit
        _row(
            "small", 128, "forward", "fp32", 1.0, peak_reserved_bytes=2 * gib
        ),  # far below 40 GB: not listed
    ]
    frame = pd.DataFrame(rows)
    use_size_order(["small", "xl", "2.7B"])
    table = timing_answers.fit_table(frame.assign(gpu_memory_bytes=150e9))
    assert table["size"].tolist() == ["xl", "2.7B"]  # the config's order, not the alphabet's
    assert table.set_index("size")["fits in 80 GB"].to_dict() == {"xl": "borderline", "2.7B": "does not fit"}
    assert set(table["fits in 40 GB"]) == {"does not fit"}
    # Headers a reader can read: a GPU's memory, not a unit in parentheses ("80 (GB)").
    assert [column_label(c) for c in table.columns if "GB" in c] == ["fits in 80 GB", "fits in 40 GB"]
    # An H100 80GB (85.0e9 B, 79.2 GiB): its own OOM rows say what does not fit.
    assert timing_answers.fit_table(frame.assign(gpu_memory_bytes=85.0e9)).empty
    assert timing_answers.fit_table(frame).empty  # a CPU run records no GPU memory
    answer = timing_answers.fit_answer(table)
    assert (
        "on an 80 GB GPU 2 of the configurations measured here would not fit or are borderline" in answer.text
    )


def test_sizes_follow_the_config_not_the_alphabet():
    use_size_order(["small", "medium", "2.7B"])
    table = pd.DataFrame({"size": ["2.7B", "medium", "small", "2.7B"], "context_length": [1, 1, 1, 2]})
    assert in_size_order(table)["size"].tolist() == ["small", "medium", "2.7B", "2.7B"]
    assert in_size_order(table)["context_length"].tolist() == [1, 1, 1, 2]


def test_kernels_sharing_a_long_start_are_told_apart_by_what_differs():
    start = "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<"
    end = ">(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"
    mul = (
        start
        + "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>>"
        + end
    )
    copy = (
        start + "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]" + end
    )
    shown = short_texts([mul, copy, "short"])
    assert "MulFunctor" in shown[mul] and "direct_copy_kernel_cuda" in shown[copy]
    assert shown[mul] != shown[copy] and "short" not in shown
    assert all(len(v) <= 62 for v in shown.values())


def _norm_rows():
    rows = []
    for norm in ("RMSNorm", "LayerNorm"):
        inner = ["square", "rsqrt"] if norm == "RMSNorm" else ["variance", "rsqrt"]
        for scale in (1.0, 100.0):
            for precision, unit in (("fp16", 1e-4), ("bf16", 1e-3)):
                errors = {
                    precision_answers.ALL: 4 * unit,
                    "input": unit,
                    inner[0]: 2 * unit,
                    inner[1]: 3 * unit,
                    precision_answers.AS_MODEL: 2 * unit,
                }
                if scale == 100.0 and precision == "fp16":
                    errors[precision_answers.ALL] = errors[inner[0]] = 1.0  # the squares overflow: output 0
                for op, error in errors.items():
                    rows.append(
                        {
                            "size": "tiny",
                            "norm": norm,
                            "precision": precision,
                            "scale": scale,
                            "low_precision_op": op,
                            "error_mean": error,
                            "nonfinite_tokens": 0,
                            "tokens": 64,
                            "input_rms": 1.0 * scale,
                            "input_abs_max": 4.0 * scale,
                        }
                    )
    return pd.DataFrame(rows)


def test_the_norm_answer_names_the_operation_and_the_overflow():
    answer = precision_answers.norm_answer(_norm_rows())
    assert "off from fp32 by RMSNorm 4.0e-04 / 4.0e-03; LayerNorm 4.0e-04 / 4.0e-03" in answer.text
    assert "rounding the input alone gives 1.0e-04 / 1.0e-03" in answer.text
    assert "the worst single operation adds 'rsqrt' 3.0e-04 / 'rsqrt' 3.0e-03" in answer.text
    assert "changes that 2.0× (under autocast" in answer.text
    assert "the inside operations add error of their own" in answer.text
    assert (
        "the output is lost in RMSNorm fp16 (from 'square'); LayerNorm fp16 (from 'variance')" in answer.text
    )
    table = precision_answers.norm_table(_norm_rows())
    assert list(table.columns[2:]) == ["fp16 ×1 scale", "bf16 ×1 scale", "fp16 ×100 scale", "bf16 ×100 scale"]


def test_fp16_stands_beside_bf16_in_the_speed_answer():
    rows = [
        _row("big", 256, "train_step", p, ms) for p, ms in (("fp32", 300.0), ("bf16", 100.0), ("fp16", 120.0))
    ]
    answer = precision_answers.speedup_answer(pd.DataFrame(rows))
    assert "bf16 autocast runs the training step 3.00× as fast as fp32 for big at context 256" in answer.text
    assert "fp16 autocast runs the training step 2.50× as fast" in answer.text
    assert answer.headline.startswith(
        "bf16 autocast makes big's training step at context 256 3.00× in wall time")
    table = precision_answers.low_precision_speedup_table(pd.DataFrame(rows))
    assert table[["fp16 speed-up ×", "bf16 speed-up ×"]].iloc[0].tolist() == [2.5, 3.0]
    assert answer.trust == "one process each: step-to-step CV 2.0% (fp32), 2.0% (bf16)"
    # A host-bound cell says so where the timing table marks it.
    marked = pd.DataFrame(rows).assign(host_bound=[False, True, False])
    assert precision_answers.speedup_answer(marked).trust.endswith(
        "host-bound or noisy: the host sets the wall time"
    )


def _kernels(rows):
    base = {
        "size": "small",
        "context_length": 256,
        "profiled_steps": 1,
        "batch_size": 4,
        "num_heads": 1,
        "d_model": 64,
        "instances": 1,
        "path": "",
    }
    return pd.DataFrame([{**base, **r} for r in rows])


def test_attention_counts_scale_and_mask_with_softmax():
    kernels = _kernels(
        [
            dict(
                pass_="forward",
                phase="forward",
                range="computing attention scores",
                kernel="gemm",
                category="GEMM",
                total_ns=4e6,
            ),
            dict(
                pass_="forward",
                phase="forward",
                range="computing attention scores",
                kernel="mul",
                category="elementwise",
                total_ns=1e6,
            ),
            dict(
                pass_="forward",
                phase="forward",
                range="computing attention scores",
                kernel="masked_fill",
                category="elementwise",
                total_ns=1e6,
            ),
            dict(
                pass_="forward",
                phase="forward",
                range="computing softmax",
                kernel="softmax",
                category="softmax",
                total_ns=2e6,
            ),
        ]
    ).rename(columns={"pass_": "pass"})
    row = nsys_tables.attention_table(kernels).iloc[0]
    assert row["scale and mask ms"] == 2.0 and row["softmax ms"] == 2.0 and row["matmul ms"] == 4.0
    assert row["non-matmul/matmul time"] == 1.0


def test_the_top_kernel_over_forward_and_backward_is_compared_with_the_forward_s():
    rows = [
        dict(pass_="forward", phase="forward", kernel="gemm_nn", category="GEMM", total_ns=5e6, range=""),
        dict(pass_="train_step", phase="forward", kernel="gemm_nn", category="GEMM", total_ns=5e6, range=""),
        dict(pass_="train_step", phase="backward", kernel="gemm_nt", category="GEMM", total_ns=8e6, range=""),
    ]
    kernels = _kernels(rows).rename(columns={"pass_": "pass"})
    said = {"kernel": "kernel", "time": "GPU time", "short": "nsys"}
    answer = nsys_answers.top_kernel_answer(kernels, said)
    assert "the top forward kernel is gemm_nn (100% of forward GPU time, called 1 times" in answer.text
    assert (
        "No: over forward+backward of a training step it is the same in 0 of 1 configuration" in answer.text
    )
    assert "gemm_nt, another GEMM" in answer.text


def test_phase_peaks_show_the_forward_phase_under_the_optimizer_s_peak(tmp_path: Path):
    rows = []
    for ctx, forward_peak in ((128, 50), (256, 60)):
        folder = tmp_path / f"s{ctx}"
        folder.mkdir()
        pd.DataFrame(
            {
                "index": [-1, 0, 1, 2],
                "allocated_bytes": [40, forward_peak, 45, 70],
                "phase": ["forward", "forward", "backward", "optimizer"],
            }
        ).to_csv(folder / "timeline.csv")
        rows.append(
            {
                "size": "2.7B",
                "context_length": ctx,
                "pass": "train_step",
                "precision": "fp32",
                "summary_dir": f"s{ctx}",
                "peak_bytes": 70,
                "peak_phase": "optimizer",
            }
        )
    table = phase_peak_table(tmp_path, pd.DataFrame(rows))
    assert (table["forward peak GiB"] * 2**30).tolist() == [50, 60]
    assert (table["step peak GiB"] * 2**30).tolist() == [70, 70]
    assert set(table["peak in phase"]) == {"optimizer"}


def test_answers_link_to_their_table_and_headlines_make_the_summary(tmp_path: Path):
    answers = Answers(
        [
            Answer(
                "(b) question", "computed answer", "timing_step_time", headline="A headline.", trust="±1%"
            ),
            Answer("(c) other", "no source", "missing_table"),
        ]
    )
    table = Table("Step time", pd.DataFrame({"a": [1]}), name="timing_step_time")
    render(
        [Section("timing", "1. Timing", [answers, table])],
        {"gpu": "X"},
        REPO / "workflow/templates",
        tmp_path,
        "T",
        "r",
    )
    html = (tmp_path / "index.html").read_text()
    assert 'id="table-timing_step_time"' in html
    assert 'href="#table-timing_step_time"' in html
    assert html.index('id="summary"') < html.index('id="timing"')
    assert 'A headline. <span class="trust">(±1%)</span>' in html
    assert 'href="#table-missing_table"' not in html  # no dangling link
    md = (tmp_path / "report.md").read_text()
    assert "## Summary" in md and "- A headline. (±1%)" in md
    assert "**(b) question** computed answer" in md


def test_the_operation_of_an_allocation_is_the_code_at_its_line(tmp_path: Path):
    from lmstudy.analyse.memory.sources import source_code

    source = tmp_path / "model.py"
    source.write_text("def f(q, k):\n    scores  =  q @ k.transpose(-2, -1)\n    return scores\n")
    assert source_code({"filename": str(source), "line": 2}) == "scores = q @ k.transpose(-2, -1)"
    assert source_code({"filename": str(tmp_path / "gone.py"), "line": 2}) == ""


def test_the_report_points_only_at_profiles_that_are_in_the_run_folder(tmp_path: Path):
    from lmstudy.sections.nsys.section import _kept_profiles

    results = tmp_path / "results" / "run"
    kept = results / "nsys/raw/a/profile/profile.nsys-rep"
    kept.parent.mkdir(parents=True)
    kept.write_text("")
    runs = pd.DataFrame(
        {
            "files": [
                "results/run/nsys/raw/a/profile/profile.nsys-rep "
                "results/run/nsys/raw/a/profile/profile.sqlite",
                "results/run/nsys/raw/a/profile/profile.nsys-rep",
                None,
            ]
        }
    )
    text = _kept_profiles(results, runs)
    assert text.count("profile.nsys-rep") == 1 and "kept" in text
    assert "Absent from this run's folder: results/run/nsys/raw/a/profile/profile.sqlite." in text


def test_a_block_the_backward_made_in_cpp_is_named_by_its_autograd_operation():
    from lmstudy.analyse.memory.sources import autograd_operation

    frames = [
        {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
        {"filename": "??", "line": 0, "name": "torch::autograd::generated::SoftmaxBackward0::apply(...)"},
        {"filename": "??", "line": 0, "name": "torch::autograd::Engine::evaluate_function"},
    ]
    assert autograd_operation(frames) == "SoftmaxBackward0"
    assert autograd_operation([{"filename": "model.py", "line": 3, "name": "forward"}]) == ""


def test_kernel_aliases_name_what_real_kernels_do():
    from lmstudy.analyse.nsys.names import kernel_alias

    from .conftest import FIXTURES

    names = pd.read_csv(FIXTURES / "gpu/nsys_train_fp32_cuda_gpu_kern_sum.csv")["Name"]
    aliases = {kernel_alias(n) for n in names}
    # The three the review could not tell apart: Mul, copy and masked_fill, each an
    # elementwise_kernel<128, 2, ...>.
    assert {
        "elementwise_kernel(MulFunctor)",
        "elementwise_kernel(direct_copy_kernel_cuda)",
        "elementwise_kernel(masked_fill_kernel)",
    } <= aliases
    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4"
    assert (
        kernel_alias(gemm + "_execute_kernel__5x_cublas")
        == "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_ffma"
    )
    assert kernel_alias("aten::mm") == "aten::mm"
    assert all(len(a) <= 70 for a in aliases)


def test_memory_findings_print_no_range_of_one_value():
    from lmstudy.sections.memory.findings import _kind_findings

    gib = 2**30
    rows = pd.DataFrame(
        [
            {"size": "small", "context_length": 256, "pass": "train_step", "precision": precision,
             "parameters_bytes": 0.479 * gib, "optimizer_state_bytes": 0.958 * gib,
             "autocast_cache_bytes": cache * gib, "activations_bytes": act * gib}
            for precision, cache, act in (("fp32", 0.0, 1.10), ("bf16", 0.225, 0.838))
        ]
    )
    text = " ".join(_kind_findings(rows))
    assert "bf16 autocast keeps 0.23 GiB of bf16 weight copies" in text
    assert "Optimizer state at the peak is 2.00× the parameters' bytes (0.96 GiB)" in text
    assert "2.0000×" not in text and " to 0." not in text


def test_the_attention_answer_says_how_memory_scales_and_what_removes_the_square():
    from lmstudy.sections.attention import answers as attention_answers

    mib = 2**20

    def row(implementation, seq, memory_mib):
        return {"implementation": implementation, "precision": "fp32", "head_dim": 64, "seq_len": seq,
                "status": "ok", "total_ms": 1.0, "steps": 20,
                "memory_before_backward_bytes": memory_mib * mib}

    # The H200's fp32 rows at d=64 (quick preset): naive 107 and 8,672 MiB, SDPA 160.5 MiB at seq 16384.
    frame = pd.DataFrame([row("naive", 1024, 107), row("naive", 16384, 8672), row("sdpa", 16384, 160.5)])
    answer = attention_answers.grid_answer(frame)
    grows = "From seq 1024 to 16384 (16× longer) naive's memory before the backward grows 81× (seq² would be"
    assert grows in answer.text
    assert "What removes it: PyTorch's fused SDPA holds 160.5 MiB there, 54× less" in answer.text


def test_parameter_counts_keep_three_significant_digits_beside_larger_models():
    import pandas as pd

    from lmstudy.report.render import column_formatter
    from lmstudy.sections.timing.answers import model_table

    frame = pd.DataFrame([
        {"size": s, "d_model": d, "d_ff": 4 * d, "num_layers": 2, "num_heads": 4, "vocab_size": 512,
         "batch_size": 2, "params": p} for s, d, p in (("tiny", 64, 169_600), ("small", 768, 128_625_408))])
    table = model_table(frame)
    column = table["parameters (M)"]
    assert [column_formatter(column)(v) for v in column] == ["129", "0.170"]


def test_a_wall_time_speed_up_whose_interval_holds_1_is_given_as_not_decided():
    # The quick report at b9d9ffa (issue 38, review M1): "bf16 autocast runs the training step 2.61× as fast
    # as fp32 (interval 0.87–7.87×)" stated a speed-up its own interval could not tell from 1.
    rows = [_row("2.7B", 256, "train_step", "fp32", 576.5, ci_low_ms=573.3, ci_high_ms=579.8),
            _row("2.7B", 256, "train_step", "bf16", 220.7, ci_low_ms=73.7, ci_high_ms=656.3)]
    answer = precision_answers.speedup_answer(pd.DataFrame(rows))
    assert ("bf16 autocast's training step is not told apart from fp32's for 2.7B at context 256 (2.61×, "
            "interval 0.87–7.87×, which holds 1)") in answer.text
    assert "runs the training step" not in answer.text
    assert "2.61× in wall time, not decided (interval 0.87–7.87×, which holds 1)" in answer.headline
    decided = [_row("2.7B", 256, "train_step", "fp32", 576.5, ci_low_ms=573.3, ci_high_ms=579.8),
               _row("2.7B", 256, "train_step", "bf16", 220.7, ci_low_ms=200.0, ci_high_ms=240.0)]
    answer = precision_answers.speedup_answer(pd.DataFrame(decided))
    assert "bf16 autocast runs the training step 2.61× as fast as fp32 for 2.7B at context 256 (interval " \
           "2.39–2.90×)" in answer.text
