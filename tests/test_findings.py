"""Each section's findings from a small hand-made table whose answers are known by heart."""

from __future__ import annotations

import json

import pandas as pd

from lmstudy.sections import compile as compile_section
from lmstudy.sections import timing


def _timing_row(size, ctx, pass_name, precision, warmup, median, **extra):
    times = [median] * 3
    return {
        "size": size, "context_length": ctx, "pass": pass_name, "precision": precision, "variant": "naive",
        "warmup_steps": warmup, "timed_steps": 3, "status": "ok", "median_ms": median, "mean_ms": median,
        "std_ms": 0.0, "cv": 0.01, "flops_per_step": 1e12 * ctx, "achieved_tflops": 1e12 * ctx / median / 1e9,
        "mfu": None, "step_times_ms": json.dumps(times), **extra,
    }


def test_timing_findings_on_a_table_with_known_answers():
    rows = []
    for ctx, fp32, bf16 in ((128, 40.0, 20.0), (256, 80.0, 20.0)):  # bf16 2x and 4x faster
        for warmup in (0, 1, 2):
            cold = 3.0 if warmup == 0 else 1.0  # the cold window's first step is 3x
            for precision, ms in (("fp32", fp32), ("bf16", bf16)):
                row = _timing_row("small", ctx, "train_step", precision, warmup, ms, mfu=ms / 200)
                if warmup == 0:
                    row["step_times_ms"] = json.dumps([ms * cold, ms, ms])
                    row["mean_ms"] = ms * (cold + 2) / 3
                rows.append(row)
    rows.append({**_timing_row("big", 128, "train_step", "fp32", 2, float("nan")), "status": "OOM"})
    frame = timing.order_sizes(pd.DataFrame(rows))
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(timing.PASS_LABELS), ordered=True)
    said = timing.findings(frame)
    assert "big ran out of memory in 1 configuration(s): context 128; training step; fp32." in said
    speedup = ("Training step: bf16 autocast is a median 3.00× as fast as fp32 "
               "(speed-up 2.00× for small ctx 128 to 4.00× for small ctx 256)")
    assert any(s.startswith(speedup) for s in said), said
    assert any(s.startswith("The highest MFU is 40.0%") for s in said), said
    assert any(s.startswith("Without warm-up the first step takes 3.0× the steady median") for s in said)
    longer = "small, training step (fp32): from context 128 to 256 (2× the tokens) the step takes 2.0×"
    assert any(longer in s for s in said), said


def test_compile_findings_on_a_table_with_known_answers():
    rows = []
    for size, eager, compiled in (("small", 30.0, 20.0), ("medium", 60.0, 30.0)):
        for mode, ms, excess in (("eager", eager, 0.5), ("compiled", compiled, 10.0)):
            rows.append({"size": size, "precision": "bf16", "attention": "naive", "pass": "train_step",
                         "mode": mode, "status": "ok", "median_ms": ms, "first_step_excess_s": excess})
    rows.append({"size": "large", "precision": "bf16", "attention": "naive", "pass": "train_step",
                 "mode": "compiled", "status": "OOM", "median_ms": None, "first_step_excess_s": None})
    rows.append({"size": "large", "precision": "bf16", "attention": "naive", "pass": "train_step",
                 "mode": "eager", "status": "ok", "median_ms": 90.0, "first_step_excess_s": 0.5})
    said = compile_section.findings(pd.DataFrame(rows))
    assert said[0] == "1 measurement(s) ran out of memory: large bf16 compiled training step."
    # speed-ups 1.5x and 2x: median 1.75x
    assert said[1].startswith(
        "Compiled, the training step is 1.75× faster than eager (median of 2 configurations)"
    )
    assert "(median of 1" not in " ".join(said)
    # 10 s of compiling, saving 10 ms and 30 ms a step: paid back after 1000 and 333 steps
    assert any(s.startswith("Where compiling helps, it pays for itself after 667 steps") for s in said), said


def test_one_configuration_is_not_a_median():
    rows = [
        {"size": "small", "precision": "bf16", "attention": "naive", "pass": "forward", "mode": mode,
         "status": "ok", "median_ms": ms, "first_step_excess_s": 1.0}
        for mode, ms in (("eager", 10.0), ("compiled", 20.0))
    ]
    said = compile_section.findings(pd.DataFrame(rows))
    assert "Compiled, the forward is 2.00× slower than eager (small bf16)." in said


def _attention_row(impl, seq, forward, backward, memory=None, status="ok", **extra):
    return {
        "implementation": impl, "precision": "fp32", "batch_size": 8, "head_dim": 64, "seq_len": seq,
        "status": status, "forward_median_ms": forward, "backward_median_ms": backward,
        "total_ms": None if forward is None else forward + backward,
        "memory_before_backward_bytes": memory, "predicted_before_backward_bytes": memory,
        "device_memory_bytes": None, "sdpa_backend": "flash" if impl == "sdpa" else None, **extra,
    }


def test_attention_findings_on_a_table_with_known_answers():
    from lmstudy.sections import attention

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
                            "(median; at best 4.00× faster, d=64, seq 2048); at the longest sequence both "
                            "ran (2048) it is 4.00× faster") for s in said), said
    assert any("grows 4× (to 4.00 GiB): an exponent of 2.00 in the sequence length" in s for s in said), said
    sdpa_memory = "(fp32, d=64): from seq 1024 to 4096 (4× longer) the memory in use before the backward"
    assert any(sdpa_memory in s and s.startswith("SDPA") for s in said), said


def test_precision_findings_on_a_table_with_known_answers():
    from lmstudy.sections import precision

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
