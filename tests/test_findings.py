"""Each section's findings from a small hand-made table whose answers are known by heart."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lmstudy.report.labels import mfu_note
from lmstudy.sections.compile import section as compile_section
from lmstudy.sections.timing import section as timing


def _timing_row(size, ctx, pass_name, precision, warmup, median, **extra):
    times = [median] * 3
    return {
        "size": size, "context_length": ctx, "pass": pass_name, "precision": precision, "variant": "naive",
        "warmup_steps": warmup, "timed_steps": 3, "status": "ok", "median_ms": median, "mean_ms": median,
        "std_ms": 0.0, "cv": 0.01, "flops_per_step": 1e12 * ctx, "achieved_tflops": 1e12 * ctx / median / 1e9,
        "mfu": None, "peak_tflops": 100.0, "step_times_ms": json.dumps([times, times]),
        "first_step_ms": median,
        "trajectory_ms": json.dumps([[median] * 5, [median] * 5]), "processes": 2, "host_bound": False,
        "noisy": False, "gpu_busy_ms": median * 0.9, "gpu_busy_share": 0.9, **extra,
    }


def test_timing_findings_on_a_table_with_known_answers():
    rows = []
    for ctx, fp32, bf16 in ((128, 40.0, 20.0), (256, 80.0, 20.0), (512, 160.0, 10.0)):  # 2x, 4x, 16x
        for warmup in (0, 1, 2):
            for precision, ms in (("fp32", fp32), ("bf16", bf16)):
                # ctx 512's bf16 is noisy: its 16x is left out of every trend
                peak = {"fp32": 66.9, "bf16": 989.4}[precision]
                row = _timing_row("small", ctx, "train_step", precision, warmup, ms, mfu=ms / 200,
                                  noisy=ctx == 512 and precision == "bf16", peak_tflops=peak,
                                  mfu_peak=precision)
                if warmup == 0:
                    row["first_step_ms"] = ms * 3  # the cold window's first step is 3x
                    row["mean_ms"] = ms * 5 / 3
                rows.append(row)
    rows.append({**_timing_row("big", 128, "train_step", "fp32", 2, float("nan")), "status": "OOM"})
    frame = timing.order_sizes(pd.DataFrame(rows))
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(timing.PASS_LABELS), ordered=True)
    said = timing.findings(frame)
    assert "big ran out of memory in 1 configuration: context 128; training step; fp32." in said
    speedup = ("Training step: bf16 autocast's wall-time speed-up over fp32 is 2.00× (small ctx 128) to "
               "4.00× (small ctx 256) in the configurations neither host-bound nor noisy; 1 of 3 left out")
    assert any(s.startswith(speedup) for s in said), said
    # Its data: every configuration considered, `used` marking the 2 it ranked, not the noisy one.
    stated = next(s for s in said if s.startswith(speedup)).data
    assert stated["used"].tolist() == [True, True, False] and stated.loc[~stated["used"], "noisy"].all()
    assert sorted(stated.loc[stated["used"], "speedup"]) == [2.0, 4.0]
    # MFU per precision, each over its own peak (fp32 160 ms / 200, bf16 20 ms / 200); the highest rate
    # apart: bf16 at ctx 512, 1e12 x 512 FLOP in 10 ms.
    best = next(s for s in said if s.startswith("The highest MFU"))
    assert "fp32 80.0% of the fp32 peak (CUDA cores, no TF32), 66.9 TFLOP/s" in best, best
    # bf16 has a noisy cell: its wall-time MFU is not ranked, the rate over the GPU's busy time (90% of
    # each step) is: 10% / 0.9.
    assert "bf16 11.1% of the bf16 tensor-core peak, 989.4 TFLOP/s over the GPU's busy time" in best, best
    assert "its wall-time MFU, 10.0%, not ranked: host-bound or noisy cells" in best, best
    assert set(best.data["mfu_peak"]) == {"fp32", "bf16"}  # the peak each MFU names, in its data
    rate = 1e12 * 512 / 10 / 1e9 / 0.9
    assert f"The highest achieved rate is {rate:.1f} TFLOP/s over the GPU's busy time (small ctx 512" in best
    assert any(s.startswith("Without warm-up the first step takes 3.0× the steady median") for s in said)
    # GPU time for every size; the wall time only where both ends are trusted (bf16's ctx 512 is noisy)
    longer = ("small, training step (fp32): from context 128 to 512 (4× the tokens) GPU busy time grows "
              "4.0×, the step's wall time 4.0×")
    assert any(longer in s for s in said), said
    assert any("(bf16)" in s and "not compared" in s for s in said), said
    assert any(s.startswith("Of 6 steady-state rows, 0 are host-bound (†) and 1 noisy (‡)") for s in said)


def _compile_rows():
    rows = []
    for size, eager, compiled in (("small", 30.0, 20.0), ("medium", 60.0, 30.0)):
        for mode, ms, excess in (("eager", eager, 0.5), ("compiled", compiled, 10.0)):
            rows.append({"size": size, "precision": "bf16", "attention": "naive", "pass": "train_step",
                         "mode": mode, "status": "ok", "median_ms": ms, "first_step_excess_s": excess,
                         "ci_low_ms": ms * 0.99, "ci_high_ms": ms * 1.01})
    rows.append({"size": "large", "precision": "bf16", "attention": "naive", "pass": "train_step",
                 "mode": "compiled", "status": "OOM", "median_ms": None, "first_step_excess_s": None})
    rows.append({"size": "large", "precision": "bf16", "attention": "naive", "pass": "train_step",
                 "mode": "eager", "status": "ok", "median_ms": 90.0, "first_step_excess_s": 0.5})
    return pd.DataFrame(rows)


def test_compile_findings_on_a_table_with_known_answers():
    said = compile_section.findings(_compile_rows())
    assert said[0] == "1 measurement ran out of memory: large bf16 compiled training step."
    # speed-ups 1.5x and 2x: median 1.75x
    assert said[1].startswith(
        "Compiled, the training step is 1.75× faster than eager measured in this section (median of the 2 "
        "configurations told apart)"
    )
    assert "(median of 1" not in " ".join(said)
    # 10 s of compiling, saving 10 ms and 30 ms a step: paid back after 1000 and 333 steps
    assert any(s.startswith("Compiling pays for itself after 333–1,000 steps against its wall-time gain")
               and "median 667" in s for s in said), said


def test_one_configuration_is_not_a_median():
    rows = [
        {"size": "small", "precision": "bf16", "attention": "naive", "pass": "forward", "mode": mode,
         "status": "ok", "median_ms": ms, "first_step_excess_s": 1.0,
         "ci_low_ms": ms - 1, "ci_high_ms": ms + 1}
        for mode, ms in (("eager", 10.0), ("compiled", 20.0))
    ]
    said = compile_section.findings(pd.DataFrame(rows))
    assert "Compiled, the forward is 2.00× slower than eager measured in this section (small bf16)." in said


def test_compiled_and_eager_within_each_others_interval_are_not_ranked():
    rows = [
        {"size": "small", "precision": "bf16", "attention": "naive", "pass": "forward", "mode": mode,
         "status": "ok", "median_ms": ms, "first_step_excess_s": 1.0, "ci_low_ms": 9.0, "ci_high_ms": 13.0}
        for mode, ms in (("eager", 10.0), ("compiled", 12.0))
    ]
    said = " ".join(compile_section.findings(pd.DataFrame(rows)))
    assert "within noise of each other" in said and "slower than eager" not in said


def test_compile_findings_carry_the_rows_their_numbers_come_from():
    from lmstudy.report.finding import Finding
    from lmstudy.report.labels import faster

    said = compile_section.findings(_compile_rows())
    assert all(isinstance(s, Finding) for s in said)
    assert said[0].data[["size", "mode", "status"]].values.tolist() == [["large", "compiled", "OOM"]]
    speedup = said[1]
    assert speedup.computed_by.endswith("compile.findings._speedups")
    # the two configurations told apart, eager over compiled: 30/20 and 60/30, their median in the sentence
    rows = speedup.data.set_index("size")
    assert rows["speedup"].to_dict() == {"medium": 2.0, "small": 1.5}
    assert (rows["eager_ms"] / rows["compiled_ms"]).to_dict() == rows["speedup"].to_dict()
    assert f"is {faster(rows['speedup'].median())} than eager" in speedup
    paid = next(s for s in said if s.startswith("Compiling pays for itself"))
    steps = paid.data.set_index("size")["break_even_steps"]  # 10 s over 10 and 30 ms a step
    assert steps.round().to_dict() == {"medium": 333, "small": 1000}
    assert f"median {steps.median():.0f})" in paid


def _attention_row(impl, seq, forward, backward, memory=None, status="ok", **extra):
    return {
        "implementation": impl, "precision": "fp32", "batch_size": 8, "head_dim": 64, "seq_len": seq,
        "status": status, "forward_median_ms": forward, "backward_median_ms": backward,
        "total_ms": None if forward is None else forward + backward,
        "memory_before_backward_bytes": memory, "predicted_before_backward_bytes": memory,
        "device_memory_bytes": None, "sdpa_backend": "flash" if impl == "sdpa" else None, **extra,
    }


def test_attention_findings_on_a_table_with_known_answers():
    from lmstudy.sections.attention import section as attention

    rows = [
        # naive: 4x the memory for 2x the length (quadratic), SDPA 2x then 4x faster
        _attention_row("naive", 1024, 2.0, 6.0, memory=1 * 2**30),
        _attention_row("naive", 2048, 8.0, 24.0, memory=4 * 2**30),
        _attention_row("naive", 4096, None, None, status="OOM"),
        _attention_row("sdpa", 1024, 1.0, 3.0, memory=2**28),
        _attention_row("sdpa", 2048, 2.0, 6.0, memory=2**29),
        _attention_row("sdpa", 4096, 4.0, 12.0, memory=2**30),
    ]
    frame = pd.DataFrame(rows)
    said = attention.findings(frame)
    assert said[0] == (
        "naive eager ran out of memory in 1 of 3 configurations, the smallest at d=64, seq 4096 (fp32)."
    )
    assert "SDPA in fp32 dispatched to the flash backend." in said
    # ratios 2x and 4x: median 3x, best 4x at seq 2048, and 4x at the longest both ran
    assert any(s.startswith("With SDPA (fp32) forward+backward is 3.00× faster than naive eager attention "
                            "(median over 2 configurations told apart; at best 4.00× faster, d=64, seq "
                            "2048); at the longest sequence told apart (2048): forward 4.00× faster")
               for s in said), said
    # SDPA's memory doubles with the length from 0 at 0: a constant of 0 and an exponent of 1 (three
    # lengths, enough for a fit; naive's two are not, and no exponent is made up for it).
    assert ("SDPA (fp32, d=64): the memory in use before the backward is a constant 0.0 MiB plus a part that "
            "grows as seq^1.00 (fitted over seq 1024 to 4096, largest misfit 0.0%).") in said
    assert not any(s.startswith("naive eager (fp32, d=64): the memory") for s in said)
    # The remedy at the longest length both ran (2048): 4 GiB against 0.5 GiB.
    assert any(s.startswith("What removes the seq x seq memory") and "At seq 2048, d=64 (fp32) it holds "
               "512.0 MiB before the backward against naive's 4096.0 MiB, 8× less." in s for s in said), said


def test_attention_findings_carry_the_rows_their_numbers_come_from():
    from lmstudy.report.finding import Finding
    from lmstudy.report.labels import faster
    from lmstudy.sections.attention import section as attention

    frame = pd.DataFrame([
        _attention_row("naive", 1024, 2.0, 6.0, memory=1 * 2**30),
        _attention_row("naive", 2048, 8.0, 24.0, memory=4 * 2**30),
        _attention_row("naive", 4096, None, None, status="OOM"),
        _attention_row("sdpa", 1024, 1.0, 3.0, memory=2**28),
        _attention_row("sdpa", 2048, 2.0, 6.0, memory=2**29),
        _attention_row("sdpa", 4096, 4.0, 12.0, memory=2**30),
    ])
    said = attention.findings(frame)
    assert all(isinstance(s, Finding) and not s.data.empty for s in said), said
    names = {f.__name__ for f in attention.FINDINGS}
    assert {s.computed_by.rsplit(".", 1)[-1] for s in said} <= names
    # The OOM's data is the implementation's rows: 3 of them, one out of memory.
    assert said[0].data["status"].tolist() == ["ok", "ok", "OOM"]
    # The speed-up: the pairs both ran (not seq 4096), each side's time and the ratio the sentence prints.
    sdpa = next(s for s in said if s.startswith("With SDPA"))
    pairs = sdpa.data.set_index("seq_len")
    assert pairs.index.tolist() == [1024, 2048]
    assert pairs["naive_total_ms"].tolist() == [8.0, 32.0] and pairs["sdpa_total_ms"].tolist() == [4.0, 8.0]
    assert (pairs["naive_total_ms"] / pairs["sdpa_total_ms"]).tolist() == pairs["total_speedup"].tolist()
    assert f"is {faster(pairs['total_speedup'].median())} than naive eager" in sdpa
    assert f"at best {faster(pairs['total_speedup'].max())}, d=64, seq 2048" in sdpa
    # The remedy: the one pair it compares, at the longest length both ran, and its ratio.
    remedy = next(s for s in said if s.startswith("What removes"))
    (row,) = remedy.data.to_dict("records")
    assert (row["seq_len"], row["head_dim"]) == (2048, 64)
    assert f"naive's {row['naive_before_backward_bytes'] / 2**20:.1f} MiB" in remedy
    assert f"{row['before_backward_naive_over_sdpa']:.0f}× less" in remedy
    # The fit: the three lengths fitted, with the fit's numbers beside them.
    fit = next(s for s in said if s.startswith("SDPA (fp32, d=64)"))
    assert fit.data["seq_len"].tolist() == [1024, 2048, 4096]
    assert f"seq^{fit.data['exponent'].iloc[0]:.2f}" in fit


def test_precision_findings_on_a_table_with_known_answers():
    from lmstudy.sections.precision import section as precision

    frame = pd.DataFrame([
        {"method": "fp32 into fp32", "increment": 0.01, "steps": 1000, "result": 10.0001, "abs_error": 0.0001,
         "rel_error": 0.00001, "increment_dtype": "float32", "accumulator_dtype": "float32",
         "increment_as_stored": 0.01},
        {"method": "fp16 into fp16", "increment": 0.01, "steps": 1000, "result": 9.9531, "abs_error": 0.0469,
         "rel_error": 0.00469, "increment_dtype": "float16", "accumulator_dtype": "float16",
         "increment_as_stored": 0.0099983},
    ])
    said = precision.accumulation_findings(frame)
    assert said == [
        "Adding 0.01 1000 times: fp16 into fp16 ends at 9.9531, off by 0.0469 (0.47%), 469× the error of "
        "fp32 into fp32 (0.0001)."
    ]


GIB = 2**30


def _memory_row(ctx, pass_name, precision, peak_gib, phase="backward", status="ok", **extra):
    return {
        "size": "small", "context_length": ctx, "pass": pass_name, "precision": precision, "status": status,
        "stage": "step", "peak_bytes": None if peak_gib is None else peak_gib * GIB,
        "peak_vs_allocator": 0.0, "peak_phase": phase, **extra,
    }


def _memory_frame(rows):
    from lmstudy.report.labels import PASS_LABELS

    frame = pd.DataFrame(rows)
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(PASS_LABELS), ordered=True)
    return frame


def test_a_memory_peak_that_shrinks_with_context_is_said_to_shrink():
    """On a real H100 the 2.7B training step's peak was 64.15 GiB at context 128 and 63.77 at 512."""
    from lmstudy.sections.memory import section as memory

    rows = [_memory_row(128, "train_step", "fp32", 64.15), _memory_row(512, "train_step", "fp32", 63.77)]
    said = memory.findings(_memory_frame(rows))
    assert "small training step fp32: from context 128 to 512 the peak shrinks from 64.15 to 63.77 GiB " \
           "(-0.38 GiB)." in said


def test_memory_findings_on_a_table_with_known_answers():
    from lmstudy.sections.memory import section as memory

    def train(ctx, precision, peak, activations, residual, **extra):
        return _memory_row(ctx, "train_step", precision, peak, activations_bytes=activations * GIB,
                           residual_stream_bytes=residual * GIB, **extra)

    rows = [
        # forward: bf16 leaves the peak where fp32 has it (1 and 2 GiB)
        _memory_row(128, "forward", "fp32", 1.0, phase="forward"),
        _memory_row(256, "forward", "fp32", 2.0, phase="forward"),
        _memory_row(128, "forward", "bf16", 1.0, phase="forward", peak_vs_allocator=0.001),
        _memory_row(256, "forward", "bf16", 2.0, phase="forward"),
        # training: fp32 3 and 8 GiB; bf16 0.9x and 0.7x of that (2.7, 5.6 GiB)
        train(128, "fp32", 3.0, 1.0, 1 / 16),  # activations 16x the residual stream
        train(256, "fp32", 8.0, 4.0, 1 / 16,  # 64x; the largest training peak, split by kind:
              parameters_bytes=1.6 * GIB, gradients_bytes=0.4 * GIB, optimizer_state_bytes=2 * GIB,
              temporaries_bytes=0, peak_phase="optimizer"),
        train(128, "bf16", 2.7, 0.5, 1 / 32),  # 16x
        train(256, "bf16", 5.6, 1.0, 1 / 32, peak_vs_allocator=-0.002),  # 32x; the worst agreement
        # out of memory: with a peak (measured, but not "ok": in no ratio nor growth), and without one
        _memory_row(512, "train_step", "fp32", 10.0, status="OOM", stage="backward", peak_vs_allocator=None),
        _memory_row(1024, "forward", "fp32", None, status="OOM", stage="forward", peak_vs_allocator=None),
    ]
    said = memory.findings(_memory_frame(rows))
    assert said[0] == (
        "The snapshot's peak agrees with torch.cuda.max_memory_allocated() within 0.2% in all 8 snapshots "
        "(largest difference: small ctx 256 training step bf16)."
    )
    assert "small ctx 512 training step fp32 ran out of memory during backward; 10.0 GiB were allocated " \
           "when it failed." in said
    assert "small ctx 1024 forward fp32 ran out of memory during forward." in said
    # train/forward: 3/1, 8/2 (fp32), 2.7/1, 5.6/2 (bf16): 2.7, 2.8, 3, 4, median 2.9
    assert "A training step's peak is 2.7–4.0× the forward pass's (median 2.9× over 4 configurations)." \
        in said
    assert "Forward: bf16 autocast leaves the peak unchanged at a median 1.00× the fp32 peak " \
           "(2 configurations)." in said
    # bf16/fp32 in training: 0.9 and 0.7, median 0.8
    assert "Training step: bf16 autocast lowers the peak to a median 0.80× the fp32 peak " \
           "(range 0.70–0.90×)." in said
    # the OOM at context 512 is no end of the growth
    assert "small training step fp32: from context 128 to 256 the peak grows from 3.00 to 8.00 GiB " \
           "(+5.00 GiB)." in said
    assert "small forward bf16: from context 128 to 256 the peak grows from 1.00 to 2.00 GiB (+1.00 GiB)." \
        in said
    # 8 GiB: activations 4 (50%), optimizer state 2 (25%), parameters 1.6 (20%); gradients 0.4 not top 3
    assert (
        "At the largest training-step peak (small ctx 256 training step fp32, in the optimizer phase) memory "
        "is activations (from forward) 4.00 GiB (50%), optimizer state 2.00 GiB (25%), parameters 1.60 GiB "
        "(20%)."
    ) in said
    assert ("The training step peaks in the backward phase in 3 of 4, optimizer phase in 1 of 4 "
            "configurations.") in said
    residual = "Activations from forward still live at a training step's peak are 16–64× one residual"
    assert any(s.startswith(residual) for s in said), said


def test_memory_findings_when_every_snapshot_ran_out_of_memory():
    from lmstudy.sections.memory import section as memory

    oom = {"status": "OOM", "peak_vs_allocator": None}
    rows = [_memory_row(128, "train_step", "fp32", 2.5, stage="backward", **oom),
            _memory_row(256, "train_step", "fp32", None, stage="forward", **oom)]
    assert memory.findings(_memory_frame(rows)) == [
        "small ctx 128 training step fp32 ran out of memory during backward; 2.5 GiB were allocated when it "
        "failed.",
        "small ctx 256 training step fp32 ran out of memory during forward.",
    ]


def _nsys_runs(*rows):
    return pd.DataFrame([
        {"size": "small", "context_length": ctx, "pass": pass_name, "precision": "bf16", "status": status,
         "backend": "nsys", "gpu": "NVIDIA H100 80GB HBM3"}
        for ctx, pass_name, status in rows
    ])


def _nsys_data() -> dict[str, pd.DataFrame]:
    """Section 2's tables of a hand-made profile, as nsys.load reads them back."""
    runs = _nsys_runs((128, "forward", "ok"), (128, "train_step", "ok"), (256, "train_step", "OOM"))
    # as runs.csv holds them: the profiled steps' own times, a JSON list
    runs["captured_step_ms"] = ["[11.0, 12.0]", "[27.0, 29.0, 28.0]", "[]"]
    # Two profiled steps: the step ranges span 10 ms and 30 ms a step; the timer says 10 and 25 ms.
    ranges = pd.DataFrame([
        {"size": "small", "context_length": 128, "pass": p, "range": r, "gpu_span_ns": span, "gpu_ns": span,
         "instances": 2}
        for p, r, span in (("forward", "step", 20e6), ("forward", "forward", 20e6),
                           ("train_step", "step", 60e6), ("train_step", "forward", 20e6))
    ])
    timing = pd.DataFrame([
        {"size": "small", "context_length": 128, "pass": p, "precision": "bf16", "variant": "naive",
         "status": "ok", "warmup_steps": w, "median_ms": ms}
        for p, w, ms in (("forward", 0, 99.0), ("forward", 2, 10.0), ("train_step", 2, 25.0))
    ])

    def kernel(pass_name, phase, name, category, ms, rng="layer", adopted=0.0):
        return {"size": "small", "context_length": 128, "pass": pass_name, "phase": phase, "range": rng,
                "path": "", "kernel": name, "category": category, "total_ns": ms * 1e6, "instances": 4,
                "adopted_ns": adopted * 1e6, "profiled_steps": 2, "batch_size": 2, "num_heads": 8,
                "d_model": 80}

    kernels = pd.DataFrame([
        # inference, 20 ms: GEMM 14 ms (70%), 8 of them in attention's matmuls; softmax 4 ms
        kernel("forward", "forward", "gemm_a", "GEMM", 4, rng="computing attention scores"),
        kernel("forward", "forward", "gemm_a", "GEMM", 4, rng="final matmul"),
        kernel("forward", "forward", "gemm_a", "GEMM", 6),
        kernel("forward", "forward", "softmax_k", "softmax", 4, rng="computing softmax"),
        kernel("forward", "forward", "add_k", "elementwise", 2),
        # training step, 60 ms: forward 20 (GEMM 10), backward 30 (GEMM 20), optimizer 10; GEMM 50%
        kernel("train_step", "forward", "gemm_a", "GEMM", 10),
        kernel("train_step", "forward", "softmax_k", "softmax", 6, rng="computing softmax"),
        kernel("train_step", "forward", "add_k", "elementwise", 4),
        kernel("train_step", "backward", "gemm_b", "GEMM", 20, adopted=15),
        kernel("train_step", "backward", "softmax_bw", "softmax", 10),
        kernel("train_step", "optimizer", "multi_tensor_apply", "optimizer", 8),
        kernel("train_step", "optimizer", "add_k", "elementwise", 2),
    ])
    return {"kernels": kernels, "ranges": ranges, "runs": runs, "timing": timing}


def test_nsys_findings_on_a_table_with_known_answers():
    from lmstudy.sections.nsys import section as nsys

    said = nsys.findings(_nsys_data())
    assert said[0] == "1 of 3 configurations ran out of memory (small ctx 256 training step)."
    # 10/10 and 30/25: the train step is the largest gap (the warm-up-0 timer row is not steady state)
    assert said[1] == (
        "Nsys's per-step span (from a step's first kernel starting to its last ending, idle gaps included) "
        "is 1.00× to 1.20× the timing section's median over 2 configurations; the largest gap is small ctx "
        "128 training step (30 ms vs 25 ms; the timer inside the capture read 28 ms). The span is 1.07× the "
        "timer of its own process, which ran under the same tracing: the span measures the traced step, but "
        "no step of that process ran untraced, so the gap to the timing section's median (other processes "
        "of another job) mixes the profiler's overhead with the variation between processes, which moves "
        "a host-bound step from one process to the next."
    )
    # gemm_a is 14 of 20 ms of inference's forward, 10 of 20 ms of training's
    assert ("The top forward kernel is a GEMM kernel in both configurations, taking 50–70% of forward "
            "GPU time.") in said
    assert ("The top backward kernel is a GEMM kernel, taking 67% of backward "
            "GPU time.") in said
    # Not "an optimizer kernel is an optimizer kernel": its share alone.
    assert "The top optimizer kernel takes 80% of optimizer GPU time." in said
    assert ("GEMMs take 70.0% of GPU time in inference and 50.0% in a training step (mean over 1 size × "
            "context configurations).") in said
    # softmax 4 ms vs matmuls 8 ms; FLOPs 5·B·H·T² vs 2·(2·B·T²·d): 5·8 / (4·80) = 0.125; 0.5 / 0.125 = 4
    assert ("Inside attention, softmax takes 0.50× the matmul time while doing 0.125× their FLOPs: per FLOP "
            "it is up to 4× slower (small ctx 128).") in said
    assert ("Autograd's own thread launched 50% of the backward pass's GPU time; those kernels are "
            "attributed to the backward range.") in said
    assert len(said) == 8


def test_nsys_findings_when_every_profile_ran_out_of_memory():
    from lmstudy.sections.nsys import section as nsys

    # What section 2 reads back then: runs.csv has the runs, kernels.csv and ranges.csv have no columns.
    runs = _nsys_runs((1024, "train_step", "OOM"))
    empty = pd.DataFrame()
    said = nsys.findings({"kernels": empty, "ranges": empty, "runs": runs, "timing": empty})
    assert said == ["The one profiled configuration ran out of memory (small ctx 1024 training step)."]


CUDAGRAPHS = "bf16 + SDPA + compile with CUDA graphs + bf16 weights with fp32 masters"
ON_CPU = "CUDA graphs (torch.compile mode reduce-overhead) need a CUDA device, and this run is on cpu."


def _ladder_rows(size, *rungs, **breakdown):
    """Rows of ladder/ladder.csv: (rung key, rung, median ms or a status, TFLOP/s), against 100 TFLOP/s;
    `breakdown` (gpu_ms_<category>=ms, gpu_busy_ms=ms) for the rung with a median of 20 ms."""
    rows = []
    for key, name, ms, tflops in rungs:
        ok = not isinstance(ms, str)
        row = {"size": size, "rung_key": key, "rung": name, "context_length": 1024, "batch_size": 4,
               "precision": "fp32" if key == "fp32" else "bf16",
               "status": "ok" if ok else ms, "median_ms": ms if ok else None,
               "achieved_tflops": tflops, "matmul_tflops": 100.0,
               "share_of_matmul": tflops / 100.0 if ok else None,
               "reason": ON_CPU if ms == "unsupported" else None, "gpu": "NVIDIA H100 80GB HBM3"}
        if ok and ms == 20.0:
            row.update(breakdown)
        rows.append(row)
    return rows


def _ladder():
    from lmstudy.sections.ladder import section as ladder

    rows = [
        # bf16 2.5x over fp32, SDPA 1.25x; CUDA graphs unsupported; compile 1.6x over SDPA, the
        # nearest rung below that ran; 5x over fp32 at 50% of the matmul rate
        *_ladder_rows("small", ("fp32", "fp32", 100.0, 10.0), ("bf16", "bf16", 40.0, 25.0),
                      ("bf16-sdpa", "bf16 + SDPA", 32.0, 31.25),
                      ("bf16-sdpa-cudagraphs-master", CUDAGRAPHS, "unsupported", None),
                      ("bf16-sdpa-compile", "bf16 + SDPA + compile", 20.0, 50.0),
                      gpu_busy_ms=16.0, gpu_ms_GEMM=12.0, gpu_ms_elementwise=3.0, gpu_ms_optimizer=1.0),
        # fp32 and compile out of memory; SDPA slower than bf16, which is the best, with no fp32 to beat
        *_ladder_rows("big", ("fp32", "fp32", "OOM", None), ("bf16", "bf16", 400.0, 50.0),
                      ("bf16-sdpa", "bf16 + SDPA", 500.0, 40.0),
                      ("bf16-sdpa-cudagraphs-master", CUDAGRAPHS, "unsupported", None),
                      ("bf16-sdpa-compile", "bf16 + SDPA + compile", "OOM", None)),
    ]
    return ladder.ladder_frame(pd.DataFrame(rows))


def test_ladder_findings_on_a_table_with_known_answers():
    from lmstudy.sections.ladder import section as ladder

    said = ladder.findings(_ladder())
    # MFU over the rung's own precision's peak (bf16: 989.4 on an H100); the share of its GPU's ceiling.
    mfu = f"MFU {100 * 50 / 989.4:.1f}% of the bf16 tensor-core peak (989.4 TFLOP/s)"
    assert said == [
        f"small: the best rung is bf16 + SDPA + compile, 20.00 ms per step, 50 TFLOP/s, {mfu} = 50.0% of the "
        "dense bf16 matmul ceiling measured on its GPU (100 TFLOP/s); 5.00× faster than fp32.",
        f"big: the best rung is bf16, 400.00 ms per step, 50 TFLOP/s, {mfu} = 50.0% of the dense bf16 matmul "
        "ceiling measured on its GPU (100 TFLOP/s).",
        "small: the biggest step beyond noise is bf16 over fp32, 2.50× faster.",
        "big: no rung is faster than the one below it beyond noise.",
        # 12, 3 and 1 of 16 ms; the step's other 4 ms the GPU waited
        "small, bf16 + SDPA + compile: of its 16.00 ms of GPU time per step, GEMM 75%, elementwise 19%, "
        "optimizer 6%; 4.00 ms of the 20.00 ms step the GPU waited for the host.",
        f"Could not run here: {CUDAGRAPHS} (small, big): {ON_CPU}",
        "Out of memory: big fp32, big bf16 + SDPA + compile.",
    ]


def test_ladder_findings_carry_the_rows_their_numbers_come_from():
    from lmstudy.report.labels import faster
    from lmstudy.sections.ladder import section as ladder

    said = ladder.findings(_ladder())
    best = said[0].data
    assert best[["size", "rung", "best"]].values.tolist() == [["small", "bf16 + SDPA + compile", True]]
    assert f"{best['median_ms'].iloc[0]:.2f} ms per step" in said[0]
    assert f"; {faster(best['speedup_vs_fp32'].iloc[0])} than fp32" in said[0]
    # The biggest step is the largest of the size's steps beyond noise: all three are in its data.
    steps = said[2].data
    assert steps["rung"].tolist() == ["bf16", "bf16 + SDPA", "bf16 + SDPA + compile"]
    top = steps.loc[steps.loc[steps["beyond_noise"], "speedup_vs_previous"].idxmax()]
    assert said[2] == (f"small: the biggest step beyond noise is {top['rung']} over {top['previous_rung']}, "
                       f"{faster(top['speedup_vs_previous'])}.")
    # The breakdown's shares are the data's category times over its busy time.
    (split,) = said[4].data.to_dict("records")
    assert split["share_GEMM"] == split["gpu_ms_GEMM"] / split["gpu_busy_ms"] == 0.75
    assert f"GEMM {100 * split['share_GEMM']:.0f}%" in said[4]
    oom = said[-1].data[["size", "rung"]].values.tolist()
    assert oom == [["big", "fp32"], ["big", "bf16 + SDPA + compile"]]


def test_ladder_findings_do_not_rank_rungs_within_noise():
    """The review's 2.7B case: masters at 176 ms vs 181 ms below it, 3% apart, with CVs of 3.3-3.6%."""
    from lmstudy.sections.ladder import section as ladder

    rows = _ladder_rows("2.7B", ("fp32", "fp32", 600.0, 145.0), ("bf16", "bf16", 181.0, 482.0),
                        ("bf16-sdpa-master", "masters", 176.0, 496.0))
    for row, cv in zip(rows, (0.001, 0.033, 0.036), strict=True):
        row["cv"] = cv
    said = ladder.findings(ladder.ladder_frame(pd.DataFrame(rows)))
    best = next(s for s in said if s.startswith("2.7B: the best rung"))
    tie = "; bf16 within noise of it (the larger of the two rungs' noise), so not ranked below it."
    assert best.endswith(tie), best
    assert "2.7B: the biggest step beyond noise is bf16 over fp32, 3.31× faster." in said
    within = ("2.7B: masters is within noise of the rung below (the larger of the two rungs' noise): "
              "not ranked.")
    assert within in said
    table = ladder.ladder_table(ladder.ladder_frame(pd.DataFrame(rows))).set_index("rung")
    assert list(table["beyond noise"]) == ["", "yes", "no, within noise"]
    # With an interval on the rows, the interval decides: 176 [170, 182] vs 181 [180, 182] overlap by ±3.4%.
    for row, (lo, hi) in zip(rows, ((599.0, 601.0), (180.0, 182.0), (170.0, 182.0)), strict=True):
        row["ci_low_ms"], row["ci_high_ms"], row["cv"] = lo, hi, 0.0
    said = ladder.findings(ladder.ladder_frame(pd.DataFrame(rows)))
    assert any(s.startswith("2.7B: masters is within noise") for s in said), said


def test_host_bound_rungs_are_ranked_on_gpu_time_and_an_undecided_wall_speed_up_says_so():
    """The review of the quick report at b9d9ffa (issue 38): the best rung "2.51× faster than fp32" in one
    run became "2.40× faster … a tie" in its A/A twin, ranked on host-bound wall times whose intervals
    overlap; the GPU times (28.5, 10.7, 9.5 and 4.1 ms a step) agreed within 1% between the runs."""
    import json

    from lmstudy.sections.ladder import section as ladder

    rows = _ladder_rows("small", ("fp32", "fp32", 52.9, 10.0), ("bf16", "bf16", 61.9, 9.0),
                        ("bf16-sdpa", "bf16 + SDPA", 50.9, 11.0),
                        ("bf16-sdpa-cudagraphs-master", CUDAGRAPHS, 21.05, 26.0))
    for row, busy, (low, high) in zip(rows, (28.52, 10.74, 9.48, 4.08),
                                      ((35.0, 80.0), (40.0, 95.0), (30.0, 86.0), (14.3, 30.9)), strict=True):
        row.update(gpu_busy_ms=busy, gpu_busy_ms_processes=json.dumps([busy * 0.999, busy * 1.001]),
                   host_bound=True, ci_low_ms=low, ci_high_ms=high)
    frame = ladder.ladder_frame(pd.DataFrame(rows))
    best = ladder.best_rungs(frame).iloc[0]
    assert (best["rung"], best["ranked_on"], best["tied_with"]) == (CUDAGRAPHS, "GPU time", [])
    said = next(s for s in ladder.findings(frame) if s.startswith("small: the rungs are host-bound"))
    assert said.startswith(f"small: the rungs are host-bound (†), so GPU time ranks them: the best rung is "
                           f"{CUDAGRAPHS}, 4.08 ms of GPU time per step (6.99× faster than fp32 on the GPU); "
                           "its wall step 21.05 ms (14.3–30.9)")
    assert "; 2.51× faster than fp32 in wall time." in said  # 14.3-30.9 against 35-80: told apart
    # Where the wall intervals overlap, the wall-time speed-up is given as not decided, never as a fact.
    rows[3].update(ci_low_ms=20.0, ci_high_ms=40.0)
    said = next(s for s in ladder.findings(ladder.ladder_frame(pd.DataFrame(rows)))
                if s.startswith("small: the rungs are host-bound"))
    assert "in wall time 2.51× fp32's speed, not decided (their intervals overlap)" in said
    assert "faster than fp32 in wall time" not in said and "a tie" not in said


def test_ladder_findings_put_the_measured_ceiling_beside_the_datasheet():
    from lmstudy.sections.ladder import section as ladder

    bursts = [{"size": "s", "rung_key": k, "gpu": "NVIDIA H200", "gpu_uuid": u, "n": 8192, "burst": i,
               "products": 20, "tflops": t, "sm_clock_mhz": c, "power_w": w}
              for k, u, rates, c, w in (("fp32", "GPU-a", (760.0, 769.0), 1980.0, 690.0),
                                        ("bf16", "GPU-b", (800.0, 806.0), 1975.0, 700.0))
              for i, t in enumerate(rates)]
    said = ladder.findings(_ladder(), pd.DataFrame(bursts))
    assert said[0] == (
        "Measured dense bf16 matmul ceiling: 769–806 TFLOP/s (the highest of a fixed number of bursts of "
        "back-to-back products, best at n=8192; 2 measurements on 2 GPUs; whether the rate had stopped "
        f"rising was not measured in this run) = {769 / 989.4 * 100:.1f}–{806 / 989.4 * 100:.1f}% of the "
        "datasheet's 989.4 TFLOP/s dense bf16 peak. During the bursts themselves the SM clock averaged "
        "1975–1980 MHz and the power 690–700 W (NVML's own average over about a second). This section's "
        "shares of the measured ceiling divide by it; its MFU divides by the datasheet peak."
    )
    table = ladder.matmul_table(pd.DataFrame(bursts))
    assert list(table["ceiling TFLOP/s (highest burst)"]) == [769.0, 806.0]
    assert list(table["median burst TFLOP/s"]) == [764.5, 803.0]
    assert list(table["GPU"]) == ["GPU-a", "GPU-b"]


def test_ladder_table_shows_each_rung_its_status_and_why_one_could_not_run():
    from lmstudy.sections.ladder import section as ladder

    table = ladder.ladder_table(_ladder()).set_index(["size", "rung"])
    compile_row = table.loc[("small", "bf16 + SDPA + compile")]
    assert compile_row["speed-up vs rung below ×"] == pytest.approx(32 / 20)  # over SDPA: graphs did not run
    assert compile_row["speed-up vs fp32 ×"] == pytest.approx(5.0)
    assert compile_row["share of the measured matmul ceiling %"] == pytest.approx(50.0)
    assert compile_row["MFU %"] == pytest.approx(100 * 50 / 989.4, rel=1e-3)
    assert compile_row["precision"] == "bf16"
    fp32_row = table.loc[("small", "fp32")]  # one definition: fp32 over the fp32 peak, named
    assert fp32_row["MFU %"] == pytest.approx(100 * 10 / 66.9, rel=1e-3)
    # Which peak, named once in the table's note rather than in a column of long text per row.
    assert "MFU of" not in table
    assert mfu_note(_ladder()) == (
        "MFU: each row over the datasheet peak of its own precision: bf16 tensor-core peak, 989.4 TFLOP/s; "
        "fp32 peak (CUDA cores, no TF32), 66.9 TFLOP/s."
    )
    graphs = table.loc[("small", CUDAGRAPHS)]
    assert (graphs["median ms"], graphs["status"]) == ("unsupported", "unsupported")
    assert graphs["why not measured"] == ON_CPU
    assert table.loc[("big", "fp32"), "median ms"] == "OOM"
    assert table.loc[("big", "fp32"), "why not measured"] == ""
    assert pd.isna(table.loc[("big", "bf16"), "speed-up vs rung below ×"])  # nothing below it ran
    best = ladder.best_table(_ladder())
    assert list(zip(best["size"], best["best rung"], strict=True)) == [
        ("small", "bf16 + SDPA + compile"), ("big", "bf16")]


def test_ladder_findings_when_no_rung_ran():
    from lmstudy.sections.ladder import section as ladder

    rows = _ladder_rows("small", ("fp32", "fp32", "OOM", None), ("bf16-sdpa-cudagraphs-master", CUDAGRAPHS,
                                                                  "unsupported", None))
    said = ladder.findings(ladder.ladder_frame(pd.DataFrame(rows).drop(columns=["median_ms"])))
    assert said == [f"Could not run here: {CUDAGRAPHS} (small): {ON_CPU}", "Out of memory: small fp32."]


def _cost_job(section, rule, job, wall, measuring=True, gpu=None, start=None, end=None, waited=0.0,
              foreign=None, **phases):
    from lmstudy.analyse.study_cost import PHASE_COLUMNS

    row = {"section": section, "rule": rule, "job": job, "wall_s": wall, "measuring": measuring,
           **{c: 0.0 for c in PHASE_COLUMNS}, **{f"{k}_s": v for k, v in phases.items()}}
    row["other_s"] = wall - sum(row[c] for c in PHASE_COLUMNS)
    # as the cost section reads jobs.csv back: a GPU index as a float, a blank as NaN
    return {**row, "host": "node1", "gpu_index": gpu, "gpu_uuid": None, "gpu_chosen_by": None,
            "cpu_cores": None, "foreign_processes": foreign, "waited_s": waited, "started_at": start,
            "ended_at": end}


def _cost_jobs():
    return pd.DataFrame([
        _cost_job("timing", "time_model", "a", 80.0, gpu=0.0, start=1000.0, end=1080.0,
                  measure=50, imports=12, build=8),  # other 10
        _cost_job("timing", "time_model", "b", 80.0, gpu=1.0, start=1000.0, end=1090.0, waited=16.0,
                  foreign="pid 4242 python3 (1500 MiB)",
                  measure=30, imports=12, build=8, wait=16),  # other 14
        # starts on GPU 0 the moment a ends: 2 at once, not 3
        _cost_job("memory", "memory_snapshot", "c", 240.0, gpu=0.0, start=1080.0, end=1320.0,
                  measure=120, imports=24, build=16, profile=24),  # other 56
        _cost_job("report", "render", "d", 100.0, measuring=False),
    ])


def test_cost_findings_on_a_table_with_known_answers():
    from lmstudy.sections.cost import section as cost

    said = cost.findings(_cost_jobs())
    # measuring jobs' 400 s: measuring 200, other 80, imports 48, builds 32, profiler 24, lease wait 16
    assert said == [
        "The run's 4 jobs took 500 s (8.3 min) added up; the 3 jobs that measure on the device took 400 s "
        "of it (80%).",
        "In the measuring jobs the time went to measuring 50%, other 20%, imports 12%, model builds 8%, "
        "profiler 6%, GPU lease 4%.",
        "The costliest section is memory: 240 s, 48% of the run.",
        "The slowest job is memory_snapshot c (240.0 s).",
        "Timing jobs spend 50% of their wall time measuring (warm-up and timed steps).",  # 80 of 160 s
    ]


def test_cost_findings_carry_the_rows_their_numbers_come_from():
    from lmstudy.sections.cost import section as cost

    said = cost.findings(_cost_jobs())
    assert said[0].data["wall_s"].sum() == 500.0
    sections = said[2].data.set_index("section")
    assert sections["share_of_run"].idxmax() == "memory"
    assert f"{100 * sections['share_of_run'].max():.0f}% of the run" in said[2]
    assert said[3].data["job"].tolist() == ["c"]
    timing_jobs = said[4].data
    assert f"{100 * timing_jobs['measure_s'].sum() / timing_jobs['wall_s'].sum():.0f}%" in said[4]
    at_once, waited, foreign = cost.concurrency_findings(_cost_jobs())
    assert f"{at_once.data['held_s'].sum():.0f} s of measuring jobs" in at_once
    assert waited.data[["job", "waited_s"]].values.tolist() == [["b", 16.0]]
    assert foreign.data[["job", "gpu_index"]].values.tolist() == [["b", "1"]]
    names = {f.__name__ for f in cost.SECTION.findings}
    assert {s.computed_by.rsplit(".", 1)[-1] for s in [*said, at_once, waited, foreign]} <= names


def test_cost_concurrency_findings_on_a_table_with_known_answers():
    from lmstudy.sections.cost import section as cost

    said = cost.concurrency_findings(_cost_jobs())
    # 80 + 90 + 240 = 410 s of jobs within 1000..1320 (320 s): 1.28 at a time
    assert said == [
        "Measuring jobs ran at most 2 at once, on 2 GPUs (0, 1): 410 s of measuring jobs within 320 s from "
        "the first one's start to the last one's end (1.3 at a time on average).",
        "1 job waited 16 s in all for a GPU that another job held (another run on this machine, or more "
        "GPU jobs than GPUs).",
        "1 job(s) shared their GPU with processes not of this study, which may have slowed them: b on GPU 1: "
        "pid 4242 python3 (1500 MiB).",
    ]


def test_a_run_made_in_parts_on_two_machines_is_said_so():
    """Two one-GPU machines, each with its GPU 0, one after the other: two GPUs, never at once."""
    from lmstudy.sections.cost import section as cost

    first = _cost_job("timing", "time_model", "a", 80.0, gpu=0.0, start=3600.0, end=3680.0, measure=50)
    second = _cost_job("attention", "attention_sweep", "b", 100.0, gpu=0.0, start=7200.0, end=7300.0,
                       measure=90)
    jobs = pd.DataFrame([
        {**first, "gpu_uuid": "GPU-aaaaaaaa-1111"}, {**second, "gpu_uuid": "GPU-bbbbbbbb-2222"},
    ])
    assert cost.concurrency_findings(jobs) == [
        "The run was made in 2 parts, on 2 GPUs one after another (different GPUs or machines; their job "
        "seconds add up to the run's): GPU 0 (GPU-aaaaaaaa): 1 measuring jobs, 80 s, 01:00–01:01 UTC; "
        "GPU 0 (GPU-bbbbbbbb): 1 measuring jobs, 100 s, 02:00–02:01 UTC. "
        "Measuring jobs ran at most 1 at once."
    ]
    per_gpu = cost.by_gpu(jobs)
    assert list(per_gpu["UUID"]) == ["GPU-aaaaaaaa-1111", "GPU-bbbbbbbb-2222"]
    assert list(per_gpu["jobs"]) == [1, 1] and list(per_gpu["job seconds"]) == [80.0, 100.0]


def test_cost_findings_without_measuring_jobs_or_lease_records():
    from lmstudy.sections.cost import section as cost

    report_only = _cost_jobs().iloc[[3]]
    said = cost.findings(report_only)
    assert said == [
        "The run's 1 jobs took 100 s (1.7 min) added up; the 0 jobs that measure on the device took 0 s "
        "of it (0%).",
        "The costliest section is report: 100 s, 100% of the run.",
        "The slowest job is render d (100.0 s).",
    ]
    assert cost.concurrency_findings(report_only) == []
    # records from before the lease was recorded: no started_at column, no concurrency to tell
    assert cost.concurrency_findings(_cost_jobs().drop(columns=["started_at", "ended_at"])) == []


def test_the_header_shows_a_gpu_index_read_back_as_a_float_once():
    """The cost table reads GPU indices back as floats (blank rows are NaN); the header says 0, not 0, 0.0."""
    from lmstudy.analyse.tables import environment_of

    timing = pd.DataFrame({"gpu_index": ["0"], "gpu": ["NVIDIA H100 80GB HBM3"]})
    cost_rows = pd.DataFrame({"gpu_index": [0.0, None], "gpu": ["NVIDIA H100 80GB HBM3", None]})
    shown = environment_of([timing, cost_rows])
    assert shown["gpu_index"] == "0" and shown["gpu"] == "NVIDIA H100 80GB HBM3"
    assert environment_of([pd.DataFrame({"gpu_index": [0.0, 1.0]})])["gpu_index"] == "0, 1"


# Each finding carries the rows its sentence was computed from (lmstudy.report.finding): the numbers the
# sentence states are the numbers its data holds, formatted as the sentence formats them.


def _traced(said, declared):
    """Every finding is a Finding with rows behind it, credited to one of the small functions its section's
    contract `declared`."""
    from lmstudy.report.finding import Finding

    names = {function.__name__ for function in declared}
    for finding in said:
        assert isinstance(finding, Finding) and not finding.data.empty, finding
        assert finding.computed_by.rsplit(".", 1)[-1] in names, finding.computed_by
    return said


def test_a_memory_findings_data_holds_the_numbers_its_sentence_states():
    from lmstudy.sections.memory import section as memory

    kinds = {"parameters_bytes": 2 * GIB, "optimizer_state_bytes": 4 * GIB, "activations_bytes": 3 * GIB,
             "gradients_bytes": 1 * GIB}
    rows = [
        _memory_row(128, "train_step", "fp32", 8.0), _memory_row(128, "train_step", "bf16", 6.0),  # 0.75x
        _memory_row(256, "train_step", "fp32", 10.0, **kinds), _memory_row(256, "train_step", "bf16", 8.5),
    ]
    said = _traced(memory.findings(_memory_frame(rows)), memory.SECTION.findings)
    ratio = next(s for s in said if s.startswith("Training step: bf16 autocast"))
    assert ratio.computed_by == "lmstudy.sections.memory.findings._bf16_against_fp32"
    data = ratio.data
    assert list(data["context_length"]) == [128, 256]
    assert list(data["bf16_over_fp32"]) == list(data["bf16_peak_bytes"] / data["fp32_peak_bytes"])
    assert ratio == (f"Training step: bf16 autocast lowers the peak to a median "
                     f"{data['bf16_over_fp32'].median():.2f}× the fp32 peak (range "
                     f"{data['bf16_over_fp32'].min():.2f}–{data['bf16_over_fp32'].max():.2f}×).")
    assert "0.80× the fp32 peak (range 0.75–0.85×)" in ratio
    # The largest training peak's kinds, largest first: the sentence states the first three.
    peak = next(s for s in said if s.startswith("At the largest training-step peak"))
    assert set(peak.data["context_length"]) == {256} and set(peak.data["precision"]) == {"fp32"}
    top = peak.data.head(3)
    stated = ", ".join(f"{label} {gib:.2f} GiB ({share * 100:.0f}%)" for label, gib, share
                       in zip(top["label"], top["gib"], top["share_of_peak"], strict=True))
    assert peak.endswith(f"memory is {stated}.")
    assert stated == ("optimizer state 4.00 GiB (40%), activations (from forward) 3.00 GiB (30%), "
                      "parameters 2.00 GiB (20%)")
    # A finding's rows keep only the configuration's key and the columns the sentence used.
    growth = next(s for s in said if s.startswith("small training step fp32: from context"))
    assert list(growth.data.columns) == ["size", "context_length", "pass", "precision", "peak_bytes",
                                         "peak_gib", "change_gib"]
    assert f"({growth.data['change_gib'].iloc[-1]:+.2f} GiB)" in growth


def test_an_nsys_findings_data_holds_the_numbers_its_sentence_states():
    from lmstudy.sections.nsys import section as nsys

    said = _traced(nsys.findings(_nsys_data()), nsys.SECTION.findings)
    span = said[1]
    ratio = span.data["nsys step / timer"]
    assert f"is {ratio.min():.2f}× to {ratio.max():.2f}× the timing section's median over {len(ratio)} " \
        in span
    worst = span.data.loc[(ratio - 1).abs().idxmax()]
    assert f"({worst['nsys step ms']:.3g} ms vs {worst['timer step ms']:.3g} ms" in span
    gemm = next(s for s in said if s.startswith("GEMMs take"))
    assert gemm.computed_by.endswith("._gemm_share")
    assert (f"GEMMs take {gemm.data['inference GEMM %'].mean():.1f}% of GPU time in inference and "
            f"{gemm.data['training GEMM %'].mean():.1f}% in a training step (mean over {len(gemm.data)} "
            ) in gemm
    top = next(s for s in said if s.startswith("The top forward kernel"))
    share = top.data["share of phase %"]
    assert set(top.data["phase"]) == {"forward"} and list(top.data["category"]) == ["GEMM", "GEMM"]
    assert f"taking {share.min():.0f}–{share.max():.0f}% of forward GPU time" in top


def test_a_precision_findings_data_holds_the_numbers_its_sentence_states():
    from lmstudy.sections.precision import section as precision

    def cell(size, ctx, speedup, high, noisy=False):
        return {"size": size, "context_length": ctx, "pass": "train_step", "variant": "naive",
                "fp32": 10.0 * speedup, "bf16": 10.0, "speedup": speedup, "speedup_low": speedup * 0.9,
                "speedup_high": high, "host_bound": False, "noisy": noisy}

    speedups = pd.DataFrame([cell("small", 128, 0.8, 0.95), cell("small", 256, 1.2, 1.3),
                             cell("big", 128, 2.5, 2.6), cell("big", 256, 3.0, 3.2),
                             cell("big", 512, 9.0, 9.5, noisy=True)])  # noisy: left out of every number
    said = _traced(precision.speedup_findings(speedups), precision.SECTION.findings)
    largest, slower, by_size = said
    # Every configuration considered, `used` marking the 4 it ranked: "(1 left out)" traces to the data.
    used = largest.data[largest.data["used"]]
    assert len(largest.data) == 5 and len(used) == 4 and not used["noisy"].any()
    best = used.loc[used["speedup"].idxmax()]
    assert largest.startswith(f"The largest wall-time bf16 speed-up is {best['speedup']:.2f}× "
                              f"({best['size']} ctx "
                              f"{best['context_length']}, training step), among the {len(used)} ")
    assert largest.endswith(f"({len(largest.data) - len(used)} left out).")
    assert slower == (f"bf16 is slower than fp32 beyond the intervals in "
                      f"{int(slower.data['slower_beyond_interval'].sum())} of {len(slower.data)} of them, "
                      f"the worst {slower.data['speedup'].min():.2f}×.")
    medians = by_size.data.drop_duplicates("size").set_index("size")["median_of_size"].sort_index()
    stated = ", ".join(f"{size} {median:.2f}×" for size, median in medians.items())
    assert by_size == ("Median wall-time speed-up by size (configurations neither host-bound nor noisy): "
                       f"{stated}.")
    assert dict(medians) == {"small": 1.0, "big": 2.75}


def test_a_comparisons_findings_carry_the_pairs_of_a_and_b_they_compared():
    from lmstudy.sections.timing import compare as timing_compare
    from lmstudy.sections.timing import section as timing

    def pair(size, ctx, ratio, verdict, precision="fp32"):
        return {"size": size, "context_length": ctx, "pass": "train_step", "precision": precision,
                "variant": "naive", "status_a": "ok", "status_b": "ok", "median_ms_a": 10.0,
                "median_ms_b": 10.0 * ratio, "ratio": ratio, "ci_low": ratio * 0.99, "ci_high": ratio * 1.01,
                "processes_a": 3, "processes_b": 3, "verdict": verdict, "tokens_per_s_a": 100.0,
                "tokens_per_s_b": 100.0 / ratio, "tokens_ratio": 1 / ratio, "note": ""}

    only = {**pair("big", 512, float("nan"), "only in B"), "status_a": None, "median_ms_a": float("nan")}
    rows = pd.DataFrame([pair("small", 128, 0.8, "faster"), pair("small", 256, 1.0, "same"),
                         pair("big", 128, 1.3, "slower"), pair("big", 128, 0.9, "undecided", "bf16"), only])
    said = _traced(timing_compare.timing_findings(rows, 0.03, 0.015), timing.SECTION.compare.findings)
    step, by_precision, in_b, rule = said
    data = step.data
    # The pairs compared, A beside B, with the ratio and the verdict of each.
    assert list(data["median_ms_b"] / data["median_ms_a"]) == pytest.approx(list(data["ratio"]))
    assert "gpu_verdict" not in data  # rows without a GPU measure (a CPU run) carry none
    assert list(data["verdict"]) == ["faster", "same", "slower", "undecided"]
    gain, loss = data.loc[data["ratio"].idxmin()], data.loc[data["ratio"].idxmax()]
    # The median ratio is over the decided rows only: the undecided one's 0.9 is noise.
    decided = data[data["verdict"] != "undecided"]
    assert step == (
        f"training step, {len(data)} configurations: wall time 1 faster, 1 slower, 1 same, 1 undecided "
        f"(median B/A {decided['ratio'].median():.3f} over the 3 decided); the largest gain is "
        f"{gain['size']} ctx {gain['context_length']} training step {gain['precision']} "
        f"({1 / gain['ratio']:.2f}× faster); the largest loss is {loss['size']} ctx {loss['context_length']} "
        f"training step {loss['precision']} ({loss['ratio']:.2f}× slower)."
    )
    medians = by_precision.data.drop_duplicates("precision").set_index("precision")["median_of_precision"]
    # bf16's one row is undecided: no ratio of it is stated.
    assert by_precision == (f"By precision, wall time: bf16 no ratio stated; fp32 median B/A "
                            f"{medians['fp32']:.3f} over the 3 decided.")
    assert medians.isna()["bf16"]
    assert in_b.startswith("1 configuration measured only in B: big ctx 512")
    assert list(in_b.data["verdict"]) == ["only in B"] and in_b.data["status_a"].isna().all()
    # Each measure's own band (issue 38): wall time's and GPU time's, each said with its edges.
    assert list(rule.data["measure"]) == ["wall time", "GPU time"]
    for _, band in rule.data.iterrows():
        assert f"{band['band_low']:.3f}–{band['band_high']:.3f} ({band['min_effect'] * 100:g}%)" in rule


def test_the_kernel_comparisons_finding_carries_the_category_times_it_compared():
    from lmstudy.sections.nsys import compare as nsys_compare
    from lmstudy.sections.nsys import section as nsys

    key = {"size": "small", "context_length": 128, "pass": "forward", "precision": "bf16"}
    categories = pd.DataFrame([{**key, "category": c, "ms_a": a, "ms_b": b, "change": b / a - 1}
                               for c, a, b in (("GEMM", 8.0, 4.0), ("softmax", 2.0, 2.01))])
    configs = pd.DataFrame([{**key, "status_a": "ok", "status_b": "ok", "presence": ""},
                            {**key, "context_length": 256, "status_a": "ok", "status_b": "OOM",
                             "presence": "OOM in B"}])
    said = _traced(nsys_compare.kernel_findings(categories, configs, 0.03), nsys.SECTION.compare.findings)
    missing, forward = said
    assert missing == "Profile small ctx 256 forward bf16: OOM in B."
    assert list(missing.data[["status_a", "status_b", "presence"]].iloc[0]) == ["ok", "OOM", "OOM in B"]
    sums = forward.data.set_index("category")
    assert f"went from {sums['ms_a'].sum():.3g} ms to {sums['ms_b'].sum():.3g} ms" in forward
    assert f"GEMM time fell {abs(sums.loc['GEMM', 'change']) * 100:.0f}%" in forward
    assert "GEMM time fell 50%, softmax time did not change (within 3%)." in forward


# Issue 32, item 14: what a small run (one configuration, one process count) says reads as sentences.
NOT_APPLICABLE = "own: switching the attention to sdpa needs a factory that takes an `attention` keyword"


def _small_run() -> pd.DataFrame:
    rows = []
    for warmup in (0, 1, 2):
        for pass_name, fp32, bf16 in (("forward", 1.0, 1.25), ("forward_backward", 3.0, 3.8)):
            for precision, ms in (("fp32", fp32), ("bf16", bf16)):
                rows.append(_timing_row("tiny", 64, pass_name, precision, warmup, ms,
                                        ci_low_ms=ms * 0.5, ci_high_ms=ms * 1.5))
    rows.append({**_timing_row("tiny", 64, "forward", "fp32", 2, float("nan")), "variant": "sdpa",
                 "status": "not applicable", "processes": 0,
                 "error": NOT_APPLICABLE})
    frame = timing.order_sizes(pd.DataFrame(rows))
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(timing.PASS_LABELS), ordered=True)
    return frame


def test_a_small_runs_sentences_name_one_value_once_and_a_slowdown_as_one():
    from lmstudy.report.answers import between, processes_text
    from lmstudy.sections.precision.findings import _largest_speedup
    from lmstudy.sections.timing.tables import speedup_frame

    said = [str(s) for s in timing.findings(_small_run())]
    text = " ".join(said)
    assert "Steps 2 to 2" not in text
    assert any(s.startswith("Step 2 (after 1 warm-up step) takes") for s in said)
    assert " to 0.80× (tiny ctx 64)" not in text
    assert ("speed-up over fp32 is 0.80× (tiny ctx 64) (below 1×: slower than fp32) in the one "
            "configuration") in text
    assert "2 to 2 fresh processes" not in text and "in 2 fresh processes" in text
    assert processes_text([2, 2]) == "2 fresh processes" and processes_text([1]) == "1 fresh process"
    assert processes_text([2, 4]) == "2 to 4 fresh processes" and between(3.0, 3.04, ".1f", " s") == "3.0 s"
    (largest,) = _largest_speedup(speedup_frame(_small_run()))
    assert "largest bf16 speed-up" not in largest and "slower than fp32 in every configuration" in largest


def test_a_small_runs_tables_give_no_negative_time_and_say_why_a_row_was_not_measured():
    from lmstudy.sections.timing.tables import backward_frame, backward_table, variants_table

    interval = backward_table(backward_frame(_small_run()))["95% CI ms"].iloc[0]
    # clipped at 0, written in the column's one format
    assert not interval.startswith("-") and float(interval.split("–")[0]) == 0, interval
    variants = variants_table(_small_run())
    assert variants["why not measured"].tolist() == [NOT_APPLICABLE]


def test_every_provenance_column_has_a_label_of_words():
    from lmstudy.environment import ENVIRONMENT_COLUMNS
    from lmstudy.report.labels import ENVIRONMENT_LABELS, sentence_start

    assert set(ENVIRONMENT_COLUMNS) <= set(ENVIRONMENT_LABELS)
    assert sentence_start("CPU time") == "CPU time" and sentence_start("the profiler") == "The profiler"


# Issue 32, item 13: on a CPU the explanations are the CPU's, and a share above the ceiling is flagged.
@pytest.mark.parametrize(("device", "said", "not_said"), [
    ("cpu (x86_64)", "the first allocations of the model's activations", "CUDA"),
    ("NVIDIA H100 80GB HBM3", "the CUDA context and kernel loading", "operator (their dispatch"),
])
def test_the_cold_start_is_explained_for_the_device_that_ran(device, said, not_said):
    from lmstudy.sections.timing.answers import warmup_answer

    frame = _small_run().assign(gpu=device)
    frame["first_step_ms"] = frame["median_ms"] * 4
    cold = next(str(s) for s in timing.findings(frame) if str(s).startswith("Without warm-up"))
    answer = warmup_answer(frame).text
    for text in (cold, answer):
        assert said in text and not_said not in text, text


def test_a_ladder_rung_above_the_measured_ceiling_is_flagged_on_a_cpu():
    from lmstudy.sections.ladder import section as ladder

    rows = _ladder_rows("tiny", ("fp32", "fp32", 10.0, 0.1), ("bf16", "bf16", 8.0, 120.2))
    frame = ladder.ladder_frame(pd.DataFrame(rows).assign(gpu="cpu (x86_64)"))
    best = next(str(s) for s in ladder.findings(frame) if str(s).startswith("tiny: the best rung"))
    assert "= 120.2% of the dense bf16 matmul ceiling measured on its CPU (100 TFLOP/s) (above 100%: the " \
           "measured ceiling is no ceiling here" in best, best


# Issue 32, item 12: the normalisation experiment names whose activations it ran on.
def test_the_normalisation_experiment_names_the_built_in_model_as_whose_activations_it_used():
    from lmstudy.model_choice import BUILTIN_NAME
    from lmstudy.sections.precision.section import norm_activations

    norms = pd.DataFrame({"size": ["tiny"]})
    own = pd.DataFrame({"model": ["encoder-lm"]})
    whose, note = norm_activations(norms, own)
    assert whose == f"the {BUILTIN_NAME}'s own activations (size tiny, random weights)"
    assert note.startswith(" These are not the activations of the model this study measures (encoder-lm)")
    assert norm_activations(norms, pd.DataFrame({"model": [BUILTIN_NAME]}))[1] == ""


def test_the_cost_sections_phases_are_named_for_a_cpu_run_without_cuda():
    from lmstudy.sections.cost.section import _phase_label

    cpu = pd.DataFrame({"measuring": [True], "gpu_chosen_by": ["none"]})
    gpu = pd.DataFrame({"measuring": [True], "gpu_chosen_by": ["LMSTUDY_GPUS"]})
    assert _phase_label(cpu, "start_s") == "starting fresh processes"
    assert "CUDA" in _phase_label(gpu, "start_s")


def test_a_top_kernel_share_is_of_the_configurations_it_is_top_in_and_larger_categories_are_not_next():
    """Issue 32's reading: 'a GEMM in 1 of 2 configurations, taking 30-65%' took the 65% from a copy,
    and 'the next categories' named categories larger than the matrix products."""
    from lmstudy.sections.nsys import answers as nsys_answers
    from lmstudy.sections.nsys import section as nsys
    from lmstudy.sections.nsys.findings import words

    data = _nsys_data()
    copy = data["kernels"].iloc[[5]].assign(kernel="copy_k", category="memory copy/set",
                                             total_ns=40 * 1e6)
    data["kernels"] = pd.concat([data["kernels"], copy], ignore_index=True)
    said = nsys.findings(data)
    # inference's forward: gemm_a, 70%; the training step's forward: the copy, 40 of 60 ms
    assert ("The top forward kernel is a GEMM kernel in 1 of 2 configurations, taking 70% of forward GPU "
            "time (in the others, a memory copy/set kernel).") in said
    answer = nsys_answers.gemm_answer(data["kernels"], words(data["runs"])).text
    assert "memory copy/set (40.0%) takes more than matrix products do" in answer
    assert "next categories" not in answer


# Issue 40: without GPU busy time (a CPU run) the wall time's sentence keeps its verb.
def test_the_wall_time_alone_grows_with_a_verb():
    rows = [_timing_row("small", ctx, "train_step", "fp32", warmup, ms, gpu_busy_ms=float("nan"),
                        gpu_busy_share=float("nan"))
            for ctx, ms in ((128, 10.0), (512, 13.0)) for warmup in (0, 1, 2)]
    frame = timing.order_sizes(pd.DataFrame(rows))
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(timing.PASS_LABELS), ordered=True)
    said = [s for s in timing.findings(frame) if s.startswith("small, training step (fp32)")]
    assert len(said) == 1 and "the step's wall time grows 1.3×" in said[0], said


def test_a_cuda_graph_rung_whose_host_pays_per_kernel_as_eager_says_part_runs_outside_the_graph():
    # Review M6, the quick report at b9d9ffa: 52.9 ms / 1773 kernels (fp32), 61.9 / 2103 (bf16), and the
    # CUDA-graph rung 21.05 ms / 611: 30, 29 and 34 µs a kernel.
    from lmstudy.sections.ladder.findings import _per_kernel

    ladder = pd.DataFrame({"size": "small", "status": "ok", "rung": ["fp32", "bf16", CUDAGRAPHS],
                           "median_ms": [52.9, 61.9, 21.05], "kernels_per_step": [1773, 2103, 611]})
    said = _per_kernel(ladder, ladder.iloc[2])
    assert said.startswith("(34 µs of step per kernel launched, 611 a step; the other rungs 29–30 µs")
    assert "part of its step runs outside the graph" in said
    # A graph that replays: 5 ms for 611 kernels is 8 µs a kernel, and nothing is claimed.
    ladder.loc[2, "median_ms"] = 5.0
    assert "outside the graph" not in _per_kernel(ladder, ladder.iloc[2])
