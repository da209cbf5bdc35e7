"""The sharding section's part of the report: its tables, its findings, its method paragraph."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.contract import Comparison, SectionContract, wording
from lmstudy.report.finding import gather
from lmstudy.report.render import Figure, Section, Table
from lmstudy.sections.sharding import compare as sharding_compare
from lmstudy.sections.sharding.figures import draw_figures
from lmstudy.sections.sharding.findings import FINDINGS
from lmstudy.sections.sharding.tables import memory_table, step_table
from lmstudy.sections.training_runs import method_values, shown


def make_figures(results: Path, out_dir: Path) -> None:
    frame = SECTION.read(results, "sharding")
    if not frame.empty:
        draw_figures(frame, out_dir)


_say = wording(__name__)


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    method = SECTION.prose("method", **method_values(frame))
    SECTION.opening(section, frame, method, findings=gather(*(f(frame) for f in FINDINGS)))
    section.add(Table(_say("memory_title"), memory_table(frame), name="sharding_memory"))
    section.add(Figure(figures / "memory.png", _say("memory_caption"), data="sharding_memory"))
    section.add(Table(_say("step_time_title"), shown(step_table(frame)), name="sharding_step_time"))


SECTION = SectionContract(
    name="sharding",
    title="Optimizer-state sharding",
    measures="Memory and step time of AdamW with its state whole on every rank or sharded across the ranks.",
    products={"sharding": "sharding/sharding.csv"},
    body=body,
    empty="No sharding results: the section is switched off or produced no rows.",
    tables=(memory_table, step_table),
    make_figures=make_figures,
    figures=("memory.png",),
    findings=FINDINGS,
    compare=Comparison(
        reads=("sharding",), build=sharding_compare.section, findings=sharding_compare.FINDINGS
    ),
)
build = SECTION.build
