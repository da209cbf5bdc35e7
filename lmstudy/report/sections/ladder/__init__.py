"""Section 7, the optimization ladder of the training step: tables, figures and findings.

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
from lmstudy.report import coverage
from lmstudy.report.contract import Comparison, SectionContract
from lmstudy.report.render import Figure, Findings, Section, Table, Text
from lmstudy.report.sections.labels import mfu_note
from lmstudy.report.sections.ladder import compare as ladder_compare
from lmstudy.report.sections.ladder.figures import _share_figure, _time_figure
from lmstudy.report.sections.ladder.findings import FINDINGS, findings
from lmstudy.report.sections.ladder.tables import (
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
    text = (
        f"The training step (forward, backward, AdamW) at context length {int(first['context_length'])}, "
        f"batch {int(first['batch_size'])}, one rung after another, each a step up from the one before "
        "(ladder.rungs in config.yaml; README: the optimization ladder). Each size x rung is a job and a "
        "process of its own: the first step alone (torch.compile compiles in it), then "
        f"{int(first['warmup_steps'])} warm-up and {int(first['timed_steps'])} timed steps give the median"
    )
    profiled = int(first.get("profile_steps", 0) or 0)
    if profiled:
        text += (
            f", then {profiled} profiled step{'s' if profiled > 1 else ''} (torch.profiler) give the "
            f"{time_words(ladder)} per step by kernel category"
        )
        if on_cpu(ladder):
            text += " (on a CPU, torch.profiler records CPU operators, not GPU kernels)"
    text += ". TFLOP/s counts the model's FLOPs (6N + 12·L·H·Q·T per token)."
    if not matmul.empty:
        found = ceilings(matmul)
        text += (
            (" MFU is n/a on a CPU, which has no datasheet peak here." if on_cpu(ladder)
             else " MFU divides each rung's rate by the datasheet dense peak of the precision it ran in "
             "(the table names it per rung).")
            + " Separately, each rung's share is of the dense bf16 matmul ceiling "
            f"its own job measured on the same {'CPU' if on_cpu(ladder) else 'GPU'} right after the rung: "
            f"for each n ({', '.join(str(int(n)) for n in sorted(matmul['n'].unique()))}), a warm-up of "
            "products for "
            + (f"steady clocks, then bursts of {int(found['products'].max())} back-to-back products, each "
               f"timed as a whole, until the last {int(found['window'].max())} lie within "
               f"{SETTLED_WITHIN:.0%} of each other (up to {int(found['bursts'].max())} bursts here): their "
               "median is the sustained ceiling; then single products after an idle pause give the "
               "short-burst rate"
               + ("" if on_cpu(ladder) else "; the SM clock and power are read during each burst itself")
               if "settled" in found else
               f"steady clocks, then {int(found['bursts'].max())} bursts of {int(found['products'].max())} "
               "back-to-back products, each timed as a whole; the highest burst is the ceiling"
               + ("" if on_cpu(ladder) else ", the SM clock and power sampled during the bursts"))
            + ". Two rungs are ranked only where their intervals do not overlap (without intervals: where "
            "they differ by more than the larger of their steps' CVs)."
        )
    text += (
        " A rung the device cannot run (CUDA graphs or a forced flash/cuDNN attention on a CPU, a missing "
        "compiler) is shown as unsupported, with the reason; out of memory as OOM. "
        "scripts/bench_ladder.py runs the same measurement by hand."
    )
    return text


def build(results: Path, figures: Path) -> Section:
    section = SECTION.start()
    data = load(results)
    ladder = ladder_frame(data["rungs"])
    if ladder.empty:
        return section.add(Text("No ladder results: the section is switched off or produced no rows."))
    section.add(Text(_how(ladder, data["matmul"])))
    if left := coverage.not_measured_in("ladder", ladder, "sizes", "context_length", "rungs"):
        section.add(Text(left))
    section.add(Findings(findings(ladder, data["matmul"])))
    section.add(Table("Rungs per size", ladder_table(ladder), name="ladder_rungs", note=mfu_note(ladder)))
    if (figures / SHARE_FIGURE).exists():
        section.add(
            Figure(
                figures / SHARE_FIGURE,
                "Each rung's achieved TFLOP/s as a share of the matmul ceiling measured on its GPU.",
                data="ladder_rungs",
            )
        )
    if best_rungs(ladder).shape[0]:
        section.add(Table("The best rung of each size", best_table(ladder), name="ladder_best"))
    if not data["matmul"].empty:
        section.add(
            Table(
                "The measured matmul ceiling of each rung's GPU: bursts of back-to-back dense bf16 products",
                matmul_table(data["matmul"]),
                name="ladder_matmul",
            )
        )
    breakdown = breakdown_frame(ladder)
    if not breakdown.empty:
        words = time_words(ladder)
        note = (
            "On a CPU, torch.profiler records CPU operators, not GPU kernels: these are CPU operator times, "
            "and the rest of the step is time outside them (Python, autograd)."
            if on_cpu(ladder) else
            "The rest of the step is its median less the GPU's busy time: the GPU waiting for the host."
        )
        if breakdown["not_busy_ms"].isna().any():
            note += (
                " The profiled steps are other steps than the timed ones and run under the profiler: "
                "where their time exceeds the timed median, the rest of the step is n/a."
            )
        section.add(
            Table(
                f"{words} per step by kernel category, per rung",
                breakdown_table(breakdown, words),
                note=note,
                name="ladder_time_by_category",
            )
        )
        if (figures / TIME_FIGURE).exists():
            section.add(
                Figure(
                    figures / TIME_FIGURE,
                    f"{words} per step by kernel category, per rung (named as in the tables above); "
                    "the black mark is the step's median.",
                    data="ladder_time_by_category",
                )
            )
    return section


SECTION = SectionContract(
    name="ladder",
    title="7. The optimization ladder of the training step",
    measures="The training step one optimization after another (fp32 → bf16 → SDPA → compile → ...), each "
    "rung as a share of the GPU's dense bf16 matmul rate measured in the same run.",
    products={"ladder": "ladder/ladder.csv", "matmul": "ladder/matmul.csv"},
    build=build,
    make_figures=make_figures,
    tables=(ladder_table, best_table, breakdown_table, matmul_table),
    figures=(SHARE_FIGURE, TIME_FIGURE),
    findings=FINDINGS,
    compare=Comparison(reads=("ladder",), build=ladder_compare.section,
                       findings=ladder_compare.FINDINGS),
)
