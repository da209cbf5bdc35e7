"""The optimization ladder, from real timing rows measured on a CPU."""

from __future__ import annotations

import pandas as pd
import pytest

from lmstudy.atomic import write_csv
from lmstudy.report import Findings, Table
from lmstudy.sections import ladder
from lmstudy.timing import TimingSpec

from .conftest import timing_job

TINY = {"d_model": 32, "d_ff": 128, "num_layers": 1, "num_heads": 2}


@pytest.fixture(scope="module")
def timing_rows():
    rows = []
    for precision, variant in (("fp32", "naive"), ("bf16", "naive"), ("bf16", "sdpa")):
        spec = TimingSpec(
            size="tiny",
            **TINY,
            context_length=16,
            batch_size=2,
            vocab_size=128,
            precision=precision,
            variant=variant,
            passes=("forward", "train_step"),
            warmup_steps=(1,),
            timed_steps=2,
            device="cpu",
        )
        rows += timing_job(spec)
    return pd.DataFrame(rows)


def test_ladder_rungs_and_speedups(timing_rows):
    frame = ladder.ladder_frame(timing_rows[timing_rows["pass"] == "train_step"])
    assert list(frame["rung"]) == ["fp32", "bf16", "bf16 + SDPA"]
    median = frame.set_index("rung")["median_ms"]
    assert frame.set_index("rung").loc["fp32", "speedup_vs_fp32"] == pytest.approx(1.0)
    assert frame.set_index("rung").loc["bf16 + SDPA", "speedup_vs_previous"] == pytest.approx(
        median["bf16"] / median["bf16 + SDPA"]
    )
    assert frame.set_index("rung").loc["bf16 + SDPA", "speedup_vs_fp32"] == pytest.approx(
        median["fp32"] / median["bf16 + SDPA"]
    )


def test_section_names_the_missing_rung(timing_rows, tmp_path):
    write_csv(tmp_path / "timing" / "timing.csv", timing_rows)
    ladder.make_figures(tmp_path, tmp_path / "figures")
    assert (tmp_path / "figures" / "ladder.png").exists()
    built = ladder.build(tmp_path, tmp_path / "figures")
    findings = next(b for b in built.blocks if isinstance(b, Findings)).items
    assert findings[0].startswith("Not measured: bf16 + SDPA + compile")
    assert any(f.startswith("tiny at context 16: the fastest rung is") for f in findings)
    table = next(b.frame for b in built.blocks if isinstance(b, Table))
    assert list(table["rung"]) == ["fp32", "bf16", "bf16 + SDPA"]
