"""The memory section end to end on the real H200 snapshots: summaries, table, figures, report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from lmstudy.analyse.memory import summary, table
from lmstudy.measure.memory.capture import _observe_residual_dtype
from lmstudy.measure.model import ModelConfig
from lmstudy.measure.steps import build_workload, make_step
from lmstudy.report.answers import Answers, percent
from lmstudy.report.render import Figure, Findings, Table, Text
from lmstudy.sections.memory import section

from .conftest import FIXTURES

GPU = FIXTURES / "gpu"
RECORDS = json.loads((GPU / "snapshots.json").read_text())


def residual_dtype(record) -> str:
    """Observed on this CPU with the fixture's model and precision (autocast bf16 runs on a CPU)."""
    work = build_workload(ModelConfig(**record["model"]), 1, record["precision"], torch.device("cpu"))
    return _observe_residual_dtype(work.model, make_step(work, record["pass"]))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """results/<run> as the workflow lays it out, from the four fixture snapshots."""
    root = tmp_path_factory.mktemp("results")
    summaries = []
    for name, record in RECORDS.items():
        cfg = table.config_name("fixture", 128, record["pass"], record["precision"])
        raw = root / "memory" / "raw" / f"{cfg}.pickle"
        raw.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(GPU / name, raw)
        meta = {
            "size": "fixture",
            "context_length": 128,
            "pass": record["pass"],
            "precision": record["precision"],
            "batch_size": record["batch_size"],
            "d_model": record["model"]["d_model"],
            "warmup_steps": 1,
            "status": "ok",
            "stage": "done",
            "error": "",
            "max_memory_allocated": record["max_memory_allocated"],
            "residual_dtype": residual_dtype(record),
            "gpu": record["gpu"],
        }
        out = root / "memory" / "summary" / cfg
        summary.write(summary.summarize(raw, meta), out)
        summaries.append(out / "summary.json")
    frame = table.build(
        ["fixture", "absent"],
        [128],
        ["forward", "train_step"],
        ["fp32", "bf16"],
        summaries,
        root,
        "device is cpu",
    )
    frame.to_csv(root / "memory" / "memory.csv", index=False)
    section.SECTION.draw(root, root / "figures" / "memory")
    return root


def test_table_rows_measured_and_skipped(results):
    frame = pd.read_csv(results / "memory" / "memory.csv")
    assert len(frame) == 8
    assert (frame.loc[frame["size"] == "fixture", "status"] == "ok").all()
    skipped = frame[frame["size"] == "absent"]
    assert (skipped["status"] == "skipped").all() and (skipped["error"] == "device is cpu").all()
    measured = frame[frame["size"] == "fixture"]
    assert (measured["peak_vs_allocator"].abs() < 0.01).all()
    # fp32 residual stream, batch 2 x 128 x 256 x 4 bytes, even under bf16 autocast:
    # the embedding is fp32 and adding a bf16 block output to it promotes to fp32.
    assert (measured["residual_dtype"] == "float32").all()
    assert (measured["residual_stream_bytes"] == 2 * 128 * 256 * 4).all()


def test_figures_drawn(results):
    names = sorted(p.name for p in (results / "figures" / "memory").glob("*.png"))
    assert names == ["peaks.png", "timeline_fixture_forward.png", "timeline_fixture_train_step.png"]


def test_report_section(results):
    built = section.build(results, results / "figures" / "memory")
    findings = next(b for b in built.blocks if isinstance(b, Findings)).items
    frame = pd.read_csv(results / "memory" / "memory.csv").dropna(subset=["peak_bytes"])
    worst = frame["peak_vs_allocator"].abs().max()
    said = "to the byte in all 4 snapshots" if worst == 0 else f"within {percent(worst)} in all 4 snapshots"
    assert any(said in f for f in findings), findings
    wide = frame.pivot_table(index="precision", columns="pass", values="peak_bytes")
    ratio = wide["train_step"] / wide["forward"]
    assert any(f"{ratio.min():.1f}–{ratio.max():.1f}×" in f for f in findings)
    tables = {b.caption: b.frame for b in built.blocks if isinstance(b, Table)}
    peaks = tables["Peak allocated memory: snapshot analysis vs the allocator"]
    assert set(peaks["status"]) == {"ok", "skipped"}
    kinds = tables["Memory by kind at the peak (GiB)"]
    assert (
        kinds.filter(like="GiB")
        .drop(columns="total GiB")
        .sum(axis=1)
        .round(9)
        .equals(kinds["total GiB"].round(9))
    )
    largest = [c for c in tables if c.startswith("Largest allocations during fixture ctx 128 training step")]
    assert len(largest) == 2
    # The forward pass's too (the course asks for them), each with the code that made the block.
    forward = [c for c in tables if c.startswith("Largest allocations during fixture ctx 128 forward")]
    assert len(forward) == 2
    assert "operation (the code at that line)" in tables[forward[0]].columns
    phases = tables["Peak of each phase, from the timelines (GiB): the forward phase's beside the step's"]
    train = phases[phases["pass"] == "training step"]
    assert (train["forward peak GiB"] <= train["step peak GiB"]).all()
    answers = next(b for b in built.blocks if isinstance(b, Answers)).items
    assert [a.question.split(":")[0] for a in answers] == [f"memory_profiling ({k})" for k in "abcde"]
    assert not any(a.text.startswith("Not answered") for a in answers)
    assert answers[4].text.startswith("In the forward pass of fixture ctx 128")
    for block in built.blocks:
        if isinstance(block, Figure):
            assert block.path.exists()
    text = " ".join(b.text for b in built.blocks if isinstance(b, Text))
    assert "pytorch.org/memory_viz" in text and "fixture_ctx128_train_step_bf16.pickle" in text


def test_section_says_why_nothing_was_measured(tmp_path):
    frame = table.build(["tiny"], [32], ["forward"], ["fp32"], [], tmp_path, "device is cpu: no GPU")
    (tmp_path / "memory").mkdir()
    frame.to_csv(tmp_path / "memory" / "memory.csv", index=False)
    section.SECTION.draw(tmp_path, tmp_path / "figures")
    built = section.build(tmp_path, tmp_path / "figures")
    answers, block = built.blocks
    assert answers.items[0].text == "Not answered: no memory snapshot was taken: device is cpu: no GPU."
    assert all(a.text.startswith("Not answered") for a in answers.items)
    assert "No memory snapshot was taken: device is cpu: no GPU" in block.text
    assert "tiny ctx 32 forward fp32" in block.text


def _review_rows() -> pd.DataFrame:
    """2.7B training steps shaped as the H200 full run's (reviews/full-report-h200.md, D3 and D8).

    Parameters 3,406,809,600 x 4 bytes; AdamW's state twice that; bf16's copies 2 bytes per matmul
    weight (3.381e9); activations from the review's forward-phase peaks less the baseline; the peak in
    the optimizer phase with a parameter-sized foreach temporary.
    """
    params = 4 * 3_406_809_600
    copies = 2 * 3_381_411_840
    rows = []
    for precision, activations in (("fp32", (4.4, 9.2, 20.5)), ("bf16", (3.0, 6.8, 16.6))):
        for ctx, act in zip((128, 256, 512), activations, strict=True):
            cache = copies if precision == "bf16" else 0
            forward_peak = 2 * params + params + cache + act * 2**30
            rows.append(
                {
                    "size": "2.7B", "context_length": ctx, "pass": "train_step", "precision": precision,
                    "status": "ok", "peak_phase": "optimizer",
                    "parameters_bytes": params, "gradients_bytes": params,
                    "optimizer_state_bytes": 2 * params,
                    "autocast_cache_bytes": 0, "activations_bytes": 0, "temporaries_bytes": params,
                    "peak_bytes": 5 * params, "forward_phase_peak_bytes": forward_peak,
                }
            )
            rows.append(
                {
                    "size": "2.7B", "context_length": ctx, "pass": "forward", "precision": precision,
                    "status": "ok", "peak_phase": "forward",
                    "parameters_bytes": params, "optimizer_state_bytes": 0, "autocast_cache_bytes": cache,
                    "activations_bytes": act * 2**30 / 4, "peak_bytes": params + cache + act * 2**30 / 4,
                }
            )
    return pd.DataFrame(rows)


def test_kind_findings_on_a_hand_made_table():
    frame = _review_rows()
    said = section.findings(frame)
    copies = 2 * 3_381_411_840 / 2**30
    assert any(s.startswith(f"bf16 autocast keeps {copies:.2f} GiB") for s in said), said
    # The forward's activations: bf16 over fp32 from the hand-made values, all below 1.
    ratios = [3.0 / 4.4, 6.8 / 9.2, 16.6 / 20.5]
    assert any(
        s.startswith(f"Without those copies, bf16's activations at the peak are {min(ratios):.2f}–"
                     f"{max(ratios):.2f}× fp32's") for s in said
    ), said
    state = "Optimizer state at the peak is 2.00× the parameters'"
    assert any(s.startswith(state) for s in said), said
    forward = next(s for s in said if s.startswith("2.7B training step fp32: the forward phase peaks"))
    lo = (3 * 4 * 3_406_809_600 + 4.4 * 2**30) / 2**30
    assert f"peaks at {lo:.2f} GiB at context 128" in forward and "(optimizer phase)" in forward
    assert any("temporaries of 1.00× the parameters' bytes" in s for s in said)


def test_a_peak_that_does_not_change_with_context_is_said_once():
    said = section.findings(_review_rows())
    peak = 5 * 4 * 3_406_809_600 / 2**30
    assert f"2.7B training step fp32: from context 128 to 512 the peak stays at {peak:.2f} GiB." in said, said
    assert not any(f"from {peak:.2f} to {peak:.2f}" in s for s in said), said
    assert any("forward fp32: from context 128 to 512 the peak grows from" in s for s in said), said


def _marker_points(fig) -> dict[str, list[tuple[float, float]]]:
    """Each labelled series' markers in display pixels."""
    fig.canvas.draw()
    points = {}
    for ax in fig.axes:
        for line in ax.lines:
            if line.get_marker() in ("None", "", None) or line.get_label().startswith("_"):
                continue
            xy = ax.transData.transform(line.get_xydata())
            points[line.get_label()] = [tuple(p) for p in xy]
    return points


@pytest.mark.parametrize("contexts", [[256], [256, 512]])
def test_every_peak_series_shows_even_where_two_are_equal(contexts):
    """fp32's and bf16's training-step peaks are equal (the optimizer's), and the forward phase peaks
    just under them: no marker may sit on another's, and one context draws labelled points."""
    import matplotlib.pyplot as plt

    from lmstudy.sections.memory import figures

    gib = 2**30
    rows = []
    for ctx in contexts:
        for precision, forward in (("fp32", 0.56), ("bf16", 0.79)):
            rows.append({"size": "small", "context_length": ctx, "pass": "forward", "precision": precision,
                         "status": "ok", "peak_bytes": forward * gib})
            rows.append({"size": "small", "context_length": ctx, "pass": "train_step", "precision": precision,
                         "status": "ok", "peak_bytes": 2.71 * gib, "forward_phase_peak_bytes": 2.69 * gib})
    fig = figures.peaks_figure(Path("."), pd.DataFrame(rows))
    points = _marker_points(fig)
    assert len(points) == 6, points  # forward, training step and its forward phase, per precision
    everything = [(label, p) for label, ps in points.items() for p in ps]
    for i, (a, pa) in enumerate(everything):
        for b, pb in everything[i + 1:]:
            assert abs(pa[0] - pb[0]) + abs(pa[1] - pb[1]) > 6, (a, b, pa, pb)
    ax = fig.axes[0]
    if len(contexts) == 1:
        assert all(len(ps) == 1 for ps in points.values())  # points, not a line of one point
        assert {t.get_text() for t in ax.texts} >= {"2.71", "2.69", "0.56", "0.79"}
    plt.close(fig)
