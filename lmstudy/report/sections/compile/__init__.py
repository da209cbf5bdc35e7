"""Section 6, the whole model under torch.compile: tables, figures and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report import coverage
from lmstudy.report.answers import Answers
from lmstudy.report.contract import Comparison, SectionContract
from lmstudy.report.render import Figure, Findings, Section, Table, Text
from lmstudy.report.sections.compile import across
from lmstudy.report.sections.compile import answers as compile_answers
from lmstudy.report.sections.compile import compare as compile_compare
from lmstudy.report.sections.compile.figures import draw_figures
from lmstudy.report.sections.compile.findings import FINDINGS, findings
from lmstudy.report.sections.compile.tables import KEY, across_table, comparison, comparison_table
from lmstudy.report.sections.labels import order_sizes

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


def load(results: Path) -> pd.DataFrame:
    frame = SECTION.read(results, "compile")
    if frame.empty:
        return frame
    return order_sizes(frame)


def one_story(results: Path, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The eager step of each compiled configuration as sections 1, 6 and 7 measured it, and how the
    speed-up reads against each (compile.across)."""
    from lmstudy.report.sections import ladder as ladder_section
    from lmstudy.report.sections import timing as timing_section

    measurements = across.eager_measurements(
        frame, timing_section.load(results), ladder_section.load(results)["rungs"])
    return measurements, across.story(measurements, frame)


def make_figures(results: Path, out_dir: Path) -> None:
    frame = load(results)
    comp = comparison(frame) if not frame.empty else pd.DataFrame()
    if comp.empty or comp["speedup"].isna().all():
        return
    draw_figures(comp, out_dir)


def build(results: Path, figures: Path) -> Section:
    section = SECTION.start()
    frame = load(results)
    if frame.empty:
        return section.add(Text("No torch.compile results: the section is switched off or produced no rows."))
    first = frame.iloc[0]
    section.add(
        Text(
            f"Each size at context length {int(first['context_length'])}, batch {int(first['batch_size'])}: "
            f"eager, then torch.compile of the model (default mode), from the same weights. The first step "
            f"is timed alone; then {int(first['warmup_steps'])} warm-up and {int(first['timed_steps'])}"
            " timed steps give the steady median. Compile time is the compiled first step's excess over that "
            "median; the eager first step's excess is shown beside it for scale."
        )
    )
    if left := coverage.not_measured_in("compile", frame, "sizes", "context_length", "passes", "precisions"):
        section.add(Text(left))
    measurements, story = one_story(results, frame)
    section.add(Answers(compile_answers.answers(comparison(frame), story, measurements)))
    section.add(Findings(findings(frame, measurements, story)))
    if len(story):
        section.add(Table(
            "The eager step as each section measured it (median over its job's fresh processes, 95% "
            "interval between them)", across_table(measurements), name="compile_eager_across_sections"))
    section.add(
        Table(
            "Eager vs compiled: median step time, speed-up and compile time",
            comparison_table(comparison(frame)),
            name="compile_eager_vs_compiled",
        )
    )
    if (figures / "speedup.png").exists():
        section.add(
            Figure(
                figures / "speedup.png",
                "Speed-up of torch.compile over eager, per size.",
                data="compile_eager_vs_compiled",
            )
        )
    return section


SECTION = SectionContract(
    name="compile",
    title="6. torch.compile of the whole model",
    measures="The whole model eager and under torch.compile: step times, speed-up and compile time.",
    products={"compile": "compile/compile.csv"},
    build=build,
    make_figures=make_figures,
    tables=(comparison_table, across_table),
    figures=("speedup.png",),
    findings=FINDINGS,
    answers=compile_answers.answers,
    compare=Comparison(reads=("compile",), build=compile_compare.section,
                       findings=compile_compare.FINDINGS),
)
