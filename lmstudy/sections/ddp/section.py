"""The data-parallel section's part of the report: its table, its findings, its method paragraph."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.contract import Comparison, SectionContract, wording
from lmstudy.report.finding import gather
from lmstudy.report.render import Figure, Section, Table
from lmstudy.sections.ddp import compare as ddp_compare
from lmstudy.sections.ddp.figures import draw_figures
from lmstudy.sections.ddp.findings import FINDINGS
from lmstudy.sections.ddp.tables import step_table
from lmstudy.sections.training_runs import method_values, shown


def make_figures(results: Path, out_dir: Path) -> None:
    frame = SECTION.read(results, "ddp")
    if not frame.empty:
        draw_figures(frame, out_dir)


_say = wording(__name__)


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    method = SECTION.prose("method", **method_values(frame))
    SECTION.opening(section, frame, method, findings=gather(*(f(frame) for f in FINDINGS)))
    section.add(Table(_say("step_time_title"), shown(step_table(frame)), name="ddp_step_time"))
    section.add(Figure(figures / "step_time.png", _say("step_time_caption"), data="ddp_step_time"))


SECTION = SectionContract(
    name="ddp",
    title="Data-parallel training",
    measures="Step time of data-parallel training by hand (naive, flat, overlapped, bucketed) and with "
    "DistributedDataParallel, and the share of it spent communicating.",
    products={"ddp": "ddp/ddp.csv"},
    body=body,
    empty="No data-parallel results: the section is switched off or produced no rows.",
    tables=(step_table,),
    make_figures=make_figures,
    figures=("step_time.png",),
    findings=FINDINGS,
    compare=Comparison(reads=("ddp",), build=ddp_compare.section, findings=ddp_compare.FINDINGS),
)
build = SECTION.build
