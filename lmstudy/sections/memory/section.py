"""The memory section: peaks, memory by kind, timelines and largest allocations."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.answers import Answer, Answers
from lmstudy.report.contract import Comparison, SectionContract, wording
from lmstudy.report.coverage import with_columns
from lmstudy.report.labels import PASS_LABELS, order_sizes
from lmstudy.report.render import Figure, Section, Table, Text
from lmstudy.sections.memory import answers as memory_answers
from lmstudy.sections.memory import compare as memory_compare
from lmstudy.sections.memory.figures import PHASE_COLORS, _timeline_name, draw_figures
from lmstudy.sections.memory.findings import FINDINGS, findings
from lmstudy.sections.memory.tables import (
    GIB,
    KIND_LABELS,
    _label,
    kinds_table,
    largest_table,
    measured,
    peak_table,
    phase_peak_table,
    residual_table,
)

__all__ = [
    "SECTION",
    "GIB",
    "KIND_LABELS",
    "MEMORY_VIZ",
    "PHASE_COLORS",
    "_label",
    "_timeline_name",
    "build",
    "draw_figures",
    "findings",
    "kinds_table",
    "largest_table",
    "load",
    "make_figures",
    "measured",
    "peak_table",
    "phase_peak_table",
    "residual_table",
]


MEMORY_VIZ = "https://pytorch.org/memory_viz"


# The columns the section reads that a run may lack: where each snapshot's summary lies and what it found.
RECORDED = ("summary_dir", "snapshot", "peak_phase")


def load(results: Path) -> pd.DataFrame:
    frame = SECTION.read(results, "memory")
    if frame.empty:
        return frame
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(PASS_LABELS), ordered=True)
    order_sizes(frame)
    frame = with_columns(frame, RECORDED)
    return frame.sort_values(["size", "pass", "precision", "context_length"]).reset_index(drop=True)


def make_figures(results: Path, out_dir: Path) -> None:
    frame = measured(load(results))
    if frame.empty:
        return
    draw_figures(results, frame, out_dir)


_say = wording(__name__)


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    rows = measured(frame)
    if rows.empty:
        _no_snapshot(section, frame)
        return
    warmup = rows["warmup_steps"].dropna() if "warmup_steps" in rows else pd.Series(dtype=float)
    after = f"{int(warmup.iloc[0])} warm-up steps" if len(warmup) else "warm-up"
    method = SECTION.prose("method", after=after)
    SECTION.opening(section, frame, method, answers=memory_answers.answers(results, frame, rows),
                    findings=findings(frame))
    _peaks_and_kinds(section, frame, rows, results, figures)
    _timelines(section, rows, figures)
    _largest_allocations(section, rows, results)
    _raw_snapshots(section, rows, results)


def _no_snapshot(section: Section, frame: pd.DataFrame) -> None:
    """Where no snapshot was taken: each question unanswered, and why, with the configurations asked for."""
    reasons = sorted(set(frame["error"].dropna().astype(str))) if "error" in frame else []
    why = _say("no_snapshot", reasons=reasons)
    questions = list(memory_answers.Q.values())
    unanswered = [Answer(questions[0], _say("unanswered_for", why=why))]
    unanswered += [Answer(q, _say("unanswered_for_lack_of_snapshot")) for q in questions[1:]]
    section.add(Answers(unanswered))
    section.add(Text(_say("configured", why=why, configs=[_label(r) for _, r in frame.iterrows()])))


def _peaks_and_kinds(section: Section, frame: pd.DataFrame, rows: pd.DataFrame, results: Path,
                     figures: Path) -> None:
    """The peaks (table and figure), each phase's peak, memory by kind and the residual stream's size."""
    section.add(Table(_say("peaks_title"), peak_table(frame), name="memory_peaks"))
    section.add(Figure(figures / "peaks.png", _say("peaks_caption"), data="memory_peaks"))
    phases = phase_peak_table(results, rows)
    if not phases.empty:
        section.add(Table(_say("phase_peaks_title"), phases, name="memory_phase_peaks",
                          note=_say("phase_peaks_note")))
    section.add(Table(_say("kinds_title"), kinds_table(rows), name="memory_by_kind"))
    residual = residual_table(rows)
    if not residual.empty:
        section.add(Table(_say("residual_title"), residual, name="memory_residual_stream"))


def _timelines(section: Section, rows: pd.DataFrame, figures: Path) -> None:
    for (size, pass_name), _ in rows.groupby(["size", "pass"], observed=True):
        caption = _say("timeline_caption", pass_label=PASS_LABELS[pass_name], size=size)
        section.add(Figure(figures / _timeline_name(size, pass_name), caption))


def _largest_allocations(section: Section, rows: pd.DataFrame, results: Path) -> None:
    """The largest allocations at the longest context of each pass, size and precision."""
    # The forward pass's first: the course asks where its largest allocations come from.
    for _, part in rows.groupby(["pass", "size", "precision"], observed=True):
        row = part.sort_values("context_length").iloc[-1]
        largest = largest_table(results, row)
        if not largest.empty:
            name = (f"memory_largest_{row['size']}_{int(row['context_length'])}_{row['pass']}_"
                    f"{row['precision']}")
            section.add(Table(_say("largest_title", label=_label(row)), largest, note=_say("largest_note"),
                              name=name))


def _raw_snapshots(section: Section, rows: pd.DataFrame, results: Path) -> None:
    """Where the raw snapshots are, and which of them the run's folder lacks."""
    # Point only at files that are there: a copied run folder may lack the large ones.
    paths = [results / s for s in rows["snapshot"].dropna()]
    kept = [f"{p}" for p in paths if p.exists()]
    absent = [f"{p}" for p in paths if not p.exists()]
    if kept:
        section.add(Text(_say("snapshots_kept", viewer=MEMORY_VIZ, files=kept)))
    if absent:
        section.add(Text(_say("snapshots_absent", files=absent)))


SECTION = SectionContract(
    name="memory",
    title="Memory",
    measures="CUDA memory snapshots of one step: peaks, memory by kind at the peak, timelines and the "
    "largest allocations.",
    # memory.csv names each snapshot's summary folder (summary_dir), which holds the rest.
    products={
        "memory": "memory/memory.csv",
        "summaries": "memory/summary/<snapshot>/ (summary.json, timeline.csv, largest_allocations.csv)",
    },
    body=body,
    empty="No memory results: the section produced no rows.",
    load=load,
    coverage=("sizes", "context_lengths", "passes", "precisions"),
    make_figures=make_figures,
    tables=(peak_table, kinds_table, phase_peak_table, residual_table, largest_table),
    figures=("peaks.png",),
    findings=FINDINGS,
    answers=memory_answers.answers,
    compare=Comparison(reads=("memory",), build=memory_compare.section,
                       findings=memory_compare.FINDINGS),
)

build = SECTION.build
