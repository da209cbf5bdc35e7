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
