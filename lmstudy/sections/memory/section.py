"""The memory section: peaks, memory by kind, timelines and largest allocations."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.answers import Answer, Answers
from lmstudy.report.contract import Comparison, SectionContract
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


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    rows = measured(frame)
    if rows.empty:
        reasons = sorted(set(frame["error"].dropna().astype(str))) if "error" in frame else []
        configs = ", ".join(_label(r) for _, r in frame.iterrows())
        why = f"No memory snapshot was taken: {'; '.join(reasons) or 'no snapshot job ran'}."
        questions = list(memory_answers.Q.values())
        unanswered = [Answer(questions[0], f"Not answered: {why[0].lower()}{why[1:]}")]
        unanswered += [Answer(q, "Not answered: no snapshot, as (a) says.") for q in questions[1:]]
        section.add(Answers(unanswered))
        section.add(Text(f"{why} Configured: {configs}."))
        return
    warmup = rows["warmup_steps"].dropna() if "warmup_steps" in rows else pd.Series(dtype=float)
    after = f"{int(warmup.iloc[0])} warm-up steps" if len(warmup) else "warm-up"
    method = SECTION.prose("method", after=after)
    SECTION.opening(section, frame, method, answers=memory_answers.answers(results, frame, rows),
                    findings=findings(frame))
    section.add(
        Table(
            "Peak allocated memory: snapshot analysis vs the allocator",
            peak_table(frame),
            name="memory_peaks",
        )
    )
    section.add(
        Figure(
            figures / "peaks.png",
            "Peak allocated memory by context length, pass and precision, with the training step's "
            "forward phase beside its peak; each series is moved a little sideways so that equal values "
            "(fp32's and bf16's training step) both show. With one context, one labelled point each.",
            data="memory_peaks",
        )
    )
    phases = phase_peak_table(results, rows)
    if not phases.empty:
        section.add(
            Table(
                "Peak of each phase, from the timelines (GiB): the forward phase's beside the step's",
                phases,
                name="memory_phase_peaks",
                note="A training step starts with the parameters, AdamW's state and the last step's "
                     "gradients "
                "in memory; its peak is in the phase named.",
            )
        )
    section.add(Table("Memory by kind at the peak (GiB)", kinds_table(rows), name="memory_by_kind"))
    residual = residual_table(rows)
    if not residual.empty:
        section.add(
            Table(
                "The size of one residual-stream activation (batch × context × d_model × bytes)",
                residual,
                name="memory_residual_stream",
            )
        )
    for (size, pass_name), _ in rows.groupby(["size", "pass"], observed=True):
        section.add(
            Figure(
                figures / _timeline_name(size, pass_name),
                f"Allocated memory over one {PASS_LABELS[pass_name]} of {size}, phases shaded; "
                "the dotted line is the peak.",
            )
        )
    # The forward pass's first: the course asks where its largest allocations come from.
    for _, part in rows.groupby(["pass", "size", "precision"], observed=True):
        row = part.sort_values("context_length").iloc[-1]
        largest = largest_table(results, row)
        if not largest.empty:
            section.add(
                Table(
                    f"Largest allocations during {_label(row)}",
                    largest,
                    note="Grouped by size and source line; count is per step.",
                    name=f"memory_largest_{row['size']}_{int(row['context_length'])}_{row['pass']}_"
                    f"{row['precision']}",
                )
            )
    # Point only at files that are there: a copied run folder may lack the large ones.
    paths = [results / s for s in rows["snapshot"].dropna()]
    kept = ", ".join(f"{p}" for p in paths if p.exists())
    absent = ", ".join(f"{p}" for p in paths if not p.exists())
    if kept:
        section.add(
            Text(
                f"The raw snapshots are kept: open one at {MEMORY_VIZ} (drag the .pickle onto the page) "
                f"for the interactive timeline and every allocation's stack. Files: {kept}."
            )
        )
    if absent:
        section.add(Text(f"Absent from this run's folder (copied without them?): {absent}."))


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
