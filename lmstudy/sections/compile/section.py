"""The torch.compile section: the whole model under torch.compile: tables, figures and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.contract import Comparison, SectionContract, wording
from lmstudy.report.coverage import first_count, name_absent
from lmstudy.report.labels import order_sizes
from lmstudy.report.render import Figure, Section, Table
from lmstudy.sections.compile import across
from lmstudy.sections.compile import answers as compile_answers
from lmstudy.sections.compile import compare as compile_compare
from lmstudy.sections.compile.figures import draw_figures
from lmstudy.sections.compile.findings import FINDINGS, findings
from lmstudy.sections.compile.tables import KEY, across_table, comparison, comparison_table

__all__ = [
    "SECTION",
    "KEY",
    "build",
    "comparison",
    "comparison_table",
    "draw_figures",
    "findings",
    "load",
    "make_figures",
]


# The settings the method paragraph states that a run may lack: shown as n/a, named as not recorded.
RECORDED = ("batch_size", "warmup_steps", "timed_steps")


def load(results: Path) -> pd.DataFrame:
    frame = SECTION.read(results, "compile")
    if frame.empty:
        return frame
    return name_absent(order_sizes(frame), RECORDED)


def one_story(results: Path, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The eager step of each compiled configuration as sections 1, 6 and 7 measured it, and how the
    speed-up reads against each (compile.across)."""
    from lmstudy.sections.ladder import section as ladder_section
    from lmstudy.sections.timing import section as timing_section

    measurements = across.eager_measurements(
        frame, timing_section.load(results), ladder_section.load(results)["rungs"])
    return measurements, across.story(measurements, frame)


def make_figures(results: Path, out_dir: Path) -> None:
    frame = load(results)
    comp = comparison(frame) if not frame.empty else pd.DataFrame()
    if comp.empty or comp["speedup"].isna().all():
        return
    draw_figures(comp, out_dir)


_say = wording(__name__)


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    first = frame.iloc[0]
    method = SECTION.prose("method", context=int(first["context_length"]),
                           batch=first_count(frame, "batch_size"), warmup=first_count(frame, "warmup_steps"),
                           timed=first_count(frame, "timed_steps"))
    measurements, story = one_story(results, frame)
    SECTION.opening(section, frame, method,
                    answers=compile_answers.answers(comparison(frame), story, measurements),
                    findings=findings(frame, measurements, story))
    if len(story):
        section.add(Table(_say("across_title"), across_table(measurements),
                          name="compile_eager_across_sections"))
    section.add(Table(_say("comparison_title"), comparison_table(comparison(frame)),
                      name="compile_eager_vs_compiled"))
    if (figures / "speedup.png").exists():
        section.add(Figure(figures / "speedup.png", _say("speedup_caption"),
                           data="compile_eager_vs_compiled"))


SECTION = SectionContract(
    name="compile",
    title="torch.compile of the whole model",
    measures="The whole model eager and under torch.compile: step times, speed-up and compile time.",
    products={"compile": "compile/compile.csv"},
    body=body,
    empty="No torch.compile results: the section is switched off or produced no rows.",
    load=load,
    coverage=("sizes", "context_length", "passes", "precisions"),
    make_figures=make_figures,
    tables=(comparison_table, across_table),
    figures=("speedup.png",),
    findings=FINDINGS,
    answers=compile_answers.answers,
    compare=Comparison(reads=("compile",), build=compile_compare.section,
                       findings=compile_compare.FINDINGS),
)

build = SECTION.build
