"""The optimization ladder section of the training step: tables, figures and findings.

From results/<run>/ladder/ladder.csv (one row per size x rung, each rung a
job of its own, joined with its GPU's matmul ceiling: lmstudy.analyse.ladder_table)
and ladder/matmul.csv (every rung job's bursts of dense bf16 products, with
the clocks sampled during them). Each rung's achieved TFLOP/s is shown as MFU
(over its precision's datasheet peak) and as a share of the matmul ceiling
measured on its own GPU; the rungs are in the config's order (ladder.rungs),
each a step up from the one before. A rung that ran out of memory is OOM,
one the device cannot run "unsupported" with its reason: both are results.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse.ladder_table import SETTLED_WITHIN, ceilings
from lmstudy.report.contract import Comparison, SectionContract, wording
from lmstudy.report.coverage import first_count, name_absent
from lmstudy.report.labels import mfu_note
from lmstudy.report.render import Figure, Section, Table
from lmstudy.sections.ladder import compare as ladder_compare
from lmstudy.sections.ladder.figures import _share_figure, _time_figure
from lmstudy.sections.ladder.findings import FINDINGS, findings
from lmstudy.sections.ladder.tables import (
    CATEGORY_COLUMNS,
    best_rungs,
    best_table,
    breakdown_frame,
    breakdown_table,
    ladder_frame,
    ladder_table,
    matmul_table,
    on_cpu,
    time_words,
)

__all__ = [
    "SECTION",
    "CATEGORY_COLUMNS",
    "SHARE_FIGURE",
    "TIME_FIGURE",
    "_share_figure",
    "_time_figure",
    "best_rungs",
    "best_table",
    "breakdown_frame",
    "breakdown_table",
    "build",
    "findings",
    "ladder_frame",
    "ladder_table",
    "load",
    "make_figures",
    "matmul_table",
    "on_cpu",
    "time_words",
]


SHARE_FIGURE = "share_of_matmul.png"


TIME_FIGURE = "time_by_category.png"


def load(results: Path) -> dict[str, pd.DataFrame]:
    return {"rungs": SECTION.read(results, "ladder"), "matmul": SECTION.read(results, "matmul")}


def make_figures(results: Path, out_dir: Path) -> None:
    """The share of the matmul rate per rung and size; and each profiled rung's time by category."""
    ladder = ladder_frame(load(results)["rungs"])
    if ladder.empty:
        return
    _share_figure(ladder, out_dir / SHARE_FIGURE)
    breakdown = breakdown_frame(ladder)
    if not breakdown.empty:
        _time_figure(ladder, breakdown, out_dir / TIME_FIGURE)


def _how(ladder: pd.DataFrame, matmul: pd.DataFrame) -> str:
    first = ladder.iloc[0]
    ceiling = None
    if not matmul.empty:
        found = ceilings(matmul)
        settled = "settled" in found
        ceiling = {
            "sizes": ", ".join(str(int(n)) for n in sorted(matmul["n"].unique())),
            "settled": settled,
            "products": int(found["products"].max()),
            "bursts": int(found["bursts"].max()),
            "window": int(found["window"].max()) if settled else None,
            "within": f"{SETTLED_WITHIN:.0%}",
        }
    return SECTION.prose(
        "method", context=int(first["context_length"]), batch=int(first["batch_size"]),
        warmup=first_count(ladder, "warmup_steps"), timed=first_count(ladder, "timed_steps"),
        profiled=int(first.get("profile_steps", 0) or 0), time_words=time_words(ladder),
        on_cpu=on_cpu(ladder), ceiling=ceiling)


# The settings the method paragraph states that a run may lack: shown as n/a, named as not recorded.
RECORDED = ("warmup_steps", "timed_steps")


_say = wording(__name__)


def body(section: Section, data: dict[str, pd.DataFrame], results: Path, figures: Path) -> None:
    ladder = name_absent(ladder_frame(data["rungs"]), RECORDED)
    SECTION.opening(section, ladder, _how(ladder, data["matmul"]), findings=findings(ladder, data["matmul"]))
    section.add(Table(_say("rungs_title"), ladder_table(ladder), name="ladder_rungs", note=mfu_note(ladder)))
    if (figures / SHARE_FIGURE).exists():
        section.add(Figure(figures / SHARE_FIGURE, _say("share_caption"), data="ladder_rungs"))
    if best_rungs(ladder).shape[0]:
        section.add(Table(_say("best_title"), best_table(ladder), name="ladder_best"))
    if not data["matmul"].empty:
        section.add(Table(_say("matmul_title"), matmul_table(data["matmul"]), name="ladder_matmul"))
    breakdown = breakdown_frame(ladder)
    if not breakdown.empty:
        time = time_words(ladder)
        note = _say("breakdown_note", on_cpu=on_cpu(ladder), unprofiled=breakdown["not_busy_ms"].isna().any())
        section.add(Table(_say("breakdown_title", time=time), breakdown_table(breakdown, time), note=note,
                          name="ladder_time_by_category"))
        if (figures / TIME_FIGURE).exists():
            section.add(Figure(figures / TIME_FIGURE, _say("time_caption", time=time),
                               data="ladder_time_by_category"))


SECTION = SectionContract(
    name="ladder",
    title="The optimization ladder of the training step",
    measures="The training step one optimization after another (fp32 → bf16 → SDPA → compile → ...), each "
    "rung as a share of the GPU's dense bf16 matmul rate measured in the same run.",
    products={"ladder": "ladder/ladder.csv", "matmul": "ladder/matmul.csv"},
    body=body,
    empty="No ladder results: the section is switched off or produced no rows.",
    load=load,
    nothing=lambda data: ladder_frame(data["rungs"]).empty,
    coverage=("sizes", "context_length", "rungs"),
    make_figures=make_figures,
    tables=(ladder_table, best_table, breakdown_table, matmul_table),
    figures=(SHARE_FIGURE, TIME_FIGURE),
    findings=FINDINGS,
    compare=Comparison(reads=("ladder",), build=ladder_compare.section,
                       findings=ladder_compare.FINDINGS),
)

build = SECTION.build
