"""The communication section's part of the report: its table, its findings, its method paragraph."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.contract import Comparison, SectionContract, wording
from lmstudy.report.finding import gather
from lmstudy.report.render import Figure, Section, Table
from lmstudy.sections.comm import compare as comm_compare
from lmstudy.sections.comm.figures import draw_figures
from lmstudy.sections.comm.findings import FINDINGS
from lmstudy.sections.comm.tables import bandwidth_table


def _listed(values) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in sorted(set(values)))


def make_figures(results: Path, out_dir: Path) -> None:
    frame = SECTION.read(results, "comm")
    if not frame.empty:
        draw_figures(frame, out_dir)


_say = wording(__name__)


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    method = SECTION.prose(
        "method",
        backends=_listed(frame["backend"]),
        world_sizes=_listed(frame["world_size"]),
        sizes=_listed(frame["size_mb"].astype(float)),
        warmup=int(frame["warmup"].iloc[0]),
        repeats=int(frame["repeat"].max()) + 1,
    )
    SECTION.opening(section, frame, method, findings=gather(*(f(frame) for f in FINDINGS)))
    section.add(Table(_say("bandwidth_title"), bandwidth_table(frame), name="comm_bandwidth"))
    section.add(Figure(figures / "bandwidth.png", _say("bandwidth_caption"), data="comm_bandwidth"))


SECTION = SectionContract(
    name="comm",
    title="Communication: all-reduce",
    measures="All-reduce time, algorithm and bus bandwidth by tensor size, backend and number of processes.",
    products={"comm": "comm/comm.csv"},
    body=body,
    empty="No all-reduce results: the section is switched off or produced no rows.",
    tables=(bandwidth_table,),
    make_figures=make_figures,
    figures=("bandwidth.png",),
    findings=FINDINGS,
    compare=Comparison(reads=("comm",), build=comm_compare.section, findings=comm_compare.FINDINGS),
)
build = SECTION.build
