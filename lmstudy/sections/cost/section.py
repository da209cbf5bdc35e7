"""The cost section, the study's own cost: where this run's time went, by section, rule and phase."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse.study_cost import LEASE_COLUMNS, PHASE_COLUMNS, REPETITION_COLUMNS
from lmstudy.phases import PHASES
from lmstudy.report.contract import SectionContract, wording, words
from lmstudy.report.coverage import lacks, with_columns
from lmstudy.report.render import Figure, Section, Table
from lmstudy.sections.cost.figures import draw_figures
from lmstudy.sections.cost.findings import (
    FINDINGS,
    concurrency_findings,
    findings,
    repetition_findings,
)
from lmstudy.sections.cost.tables import (
    SECTION_ORDER,
    SHORT,
    by_gpu,
    by_rule,
    by_section,
    phase_names,
    slowest,
)

__all__ = [
    "SECTION",
    "PHASE_LABELS",
    "SECTION_ORDER",
    "SHORT",
    "build",
    "by_gpu",
    "by_rule",
    "by_section",
    "concurrency_findings",
    "draw_figures",
    "findings",
    "repetition_findings",
    "load",
    "make_figures",
    "slowest",
]


# The phases as the report names them, "other" last.
PHASE_LABELS = {f"{phase}_s": label for phase, label in PHASES.items()}
PHASE_LABELS["other_s"] = words("cost", "section.j2", "other_phase")


LEASE_TEXT = [c for c in LEASE_COLUMNS if c not in ("waited_s", "started_at", "ended_at")]


def load(results: Path) -> pd.DataFrame:
    """The run's job records; a phase its records predate (a run made before the phase was booked
    apart, e.g. the model's imports and the count of issue 37) is 0 s: its time is in another phase.
    The repetition's and the lease's columns, which older records lack, are read where present and
    named as not recorded where absent (coverage.with_columns)."""
    frame = SECTION.read(results, "jobs")
    if frame.empty:
        return frame
    for column in PHASE_COLUMNS:
        if column not in frame:
            frame[column] = 0.0
    if "other_s" not in frame:  # the rest of each job's wall time, as job_table computes it
        frame["other_s"] = (frame["wall_s"] - frame[PHASE_COLUMNS].sum(axis=1)).clip(lower=0.0)
    frame = with_columns(frame, [*REPETITION_COLUMNS, *LEASE_COLUMNS])
    # An absent column of the lease's text (host, GPU, who chose it) is read as text, as written ones are.
    for name in LEASE_TEXT:
        if lacks(frame, name):
            frame[name] = frame[name].astype(object)
    return frame


def make_figures(results: Path, out_dir: Path) -> None:
    frame = load(results)
    if frame.empty:
        return
    draw_figures(frame, out_dir)


_say = wording(__name__)


def _phase_label(frame: pd.DataFrame, column: str) -> str:
    no_lease = phase_names(frame) is not SHORT  # a CPU run: no GPU, no CUDA
    if column in ("wait_s", "start_s") and no_lease:
        return _say("cpu_phase", column=column)
    return PHASE_LABELS[column]


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    names = phase_names(frame)
    phases = _say("phases", named=[(names[c], _phase_label(frame, c)) for c in [*PHASE_COLUMNS, "other_s"]])
    method = SECTION.prose("method", phases=phases, one_gpu_at_a_time=names is SHORT)
    SECTION.opening(section, frame, method,
                    findings=findings(frame) + repetition_findings(frame) + concurrency_findings(frame))
    section.add(Figure(figures / "cost.png", _say("cost_caption")))
    section.add(Table(_say("by_rule_title"), by_rule(frame)))
    section.add(Table(_say("slowest_title"), slowest(frame)))
    gpus = by_gpu(frame)
    if not gpus.empty:
        section.add(Table(_say("by_gpu_title"), gpus))


SECTION = SectionContract(
    name="cost",
    title="The study's own cost",
    measures="Every job's wall time, by section, rule and phase.",
    products={"jobs": "cost/jobs.csv"},
    body=body,
    empty="No cost records: the run had no jobs.",
    load=load,
    make_figures=make_figures,
    tables=(by_rule, slowest, by_gpu),
    figures=("cost.png",),
    findings=FINDINGS,
)

build = SECTION.build
