"""Section 6, the whole model under torch.compile.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import of_all
from lmstudy.report.contract import wording
from lmstudy.report.finding import Finding, finds, gather, rows_behind, with_used
from lmstudy.report.labels import PASS_LABELS, faster
from lmstudy.sections.compile.across import KEY as ACROSS_KEY
from lmstudy.sections.compile.tables import KEY, comparison

MEASUREMENT = (*KEY, "mode")  # a configuration's key and its mode: one measurement

# What a comparison of eager and compiled is told from: the medians, their intervals and the speed-up.
COMPARED = ("eager_ms", "eager_ci_low_ms", "eager_ci_high_ms", "compiled_ms", "compiled_ci_low_ms",
            "compiled_ci_high_ms", "speedup")


_say = wording(__name__)


@finds
def _oom(frame: pd.DataFrame) -> list[Finding]:
    from lmstudy.report.answers import count

    oom = frame[frame["status"] == "OOM"]
    if not len(oom):
        return []
    names = sorted(
        {f"{r['size']} {r['precision']} {r['mode']} {PASS_LABELS[r['pass']]}" for _, r in oom.iterrows()}
    )
    return [Finding(_say("oom", measurements=count(len(oom), "measurement"), names=names),
                    rows_behind(oom, "status", key=MEASUREMENT))]


@finds
def _not_told_apart(comp: pd.DataFrame) -> list[Finding]:
    """The configurations whose eager and compiled steps are not ranked: overlapping or missing intervals."""
    unclear = ((comp[comp["has_interval"] & ~comp["apart"]], True), (comp[~comp["has_interval"]], False))
    items = []
    for rows, overlap in unclear:
        if len(rows):
            names = [f"{r['size']} {r['precision']} {PASS_LABELS[r['pass']]}" for _, r in rows.iterrows()]
            items.append(Finding(
                _say("not_told_apart", overlap=overlap, names=names,
                     configurations=of_all(len(rows), len(comp), "configuration")),
                with_used(rows_behind(comp, *COMPARED, "has_interval", "apart", key=MEASUREMENT), rows)))
    return items


@finds
def _speedups(comp: pd.DataFrame) -> list[Finding]:
    """Per pass, compiled over eager where the two are told apart: those configurations, with the speed-up."""
    items = []
    for pass_name, part in comp[comp["apart"]].groupby("pass"):
        lo, hi = part.loc[part["speedup"].idxmin()], part.loc[part["speedup"].idxmax()]
        lowest, highest = ({"faster": faster(r["speedup"]), "size": r["size"], "precision": r["precision"]}
                           for r in (lo, hi))
        text = _say("speedups", name=PASS_LABELS[pass_name], told=len(part), lowest=lowest, highest=highest,
                    median=faster(part["speedup"].median()) if len(part) > 1 else None)
        items.append(Finding(text, rows_behind(part, *COMPARED, key=MEASUREMENT)))
    return items


@finds
def _compile_time(comp: pd.DataFrame) -> list[Finding]:
    """The compile's cost: the compiled first step's excess over its steady step, per configuration."""
    if not comp["compile_s"].notna().any():
        return []
    top = comp.loc[comp["compile_s"].idxmax()]
    return [Finding(
        _say("compile_time", median=comp["compile_s"].median(),
             top=top["compile_s"] if len(comp) > 1 else None,
             name=f"{top['size']} {top['precision']} {PASS_LABELS[top['pass']]}"),
        rows_behind(comp.dropna(subset=["compile_s"]), "compile_s", key=MEASUREMENT))]


@finds
def _break_even(comp: pd.DataFrame) -> list[Finding]:
    """The steps after which the compile has paid for itself, from the gain its measure decides
    (compile.tables.break_even): wall time's where compiled and eager are told apart in wall time,
    else GPU time's where every process tells them apart there; none where neither does."""
    from lmstudy.report.answers import span

    items = []
    behind = ("eager_ms", "compiled_ms", "eager_gpu_busy_ms", "compiled_gpu_busy_ms", "compile_s",
              "break_even_steps", "break_even_from")
    for source, part in comp.groupby("break_even_from", sort=False):
        paid = part["break_even_steps"].dropna()
        names = [f"{r['size']} {r['precision']} {PASS_LABELS[r['pass']]}" for _, r in part.iterrows()]
        if source == "not told apart":
            text = _say("no_break_even", configurations=of_all(len(part), len(comp), "configuration"),
                        names=names)
        elif not len(paid):
            continue
        else:
            text = _say("break_even", steps=span(paid.min(), paid.max(), ",.0f"), wall=source == "wall time",
                        names=names, median=paid.median() if len(paid) > 1 else None)
        items.append(Finding(text, rows_behind(part, *behind, key=MEASUREMENT)))
    return items


def _measured(row) -> tuple:
    """A section's eager measurement: its median, its interval (None, None where it has none), its source."""
    low, high = row.get("ci_low_ms"), row.get("ci_high_ms")
    if not (pd.notna(low) and pd.notna(high)):
        low = high = None
    return row["median_ms"], low, high, row["source"]


@finds
def _one_story(measurements: pd.DataFrame, story: pd.DataFrame) -> list[Finding]:
    """Each eager configuration measured in several sections: the measurements side by side, whether
    their intervals disagree and by how much, and the speed-up against each."""
    from lmstudy.report.answers import count, span

    items = []
    for _, cell in story.iterrows():
        key = {k: cell[k] for k in ACROSS_KEY}
        part = measurements.merge(pd.DataFrame([key]), on=ACROSS_KEY)
        gpu = cell.get("gpu_speedup")
        text = _say("one_story", size=cell["size"], context=int(cell["context_length"]),
                    precision=cell["precision"], step=PASS_LABELS.get(cell["pass"], cell["pass"]),
                    batch=int(cell["batch_size"]), sections=count(len(part), "section"),
                    measured=[_measured(r) for _, r in part.iterrows()],
                    disagree_by=(cell["max_over_min"] - 1) * 100 if cell["disagree"] else None,
                    speedups=span(cell["speedup_min"], cell["speedup_max"]),
                    covering=span(cell["covering_low"], cell["covering_high"], ".3g"),
                    holds_one=cell["covering_low"] <= 1 <= cell["covering_high"],
                    gpu=gpu if pd.notna(gpu) else None)
        items.append(Finding(text, part.assign(disagree=cell["disagree"], max_over_min=cell["max_over_min"])))
    return items


# Declared in the section's contract: each writes one kind of finding with the rows behind it.
FINDINGS = (_oom, _not_told_apart, _speedups, _compile_time, _break_even, _one_story)


def findings(frame: pd.DataFrame, measurements: pd.DataFrame | None = None,
             story: pd.DataFrame | None = None) -> list[Finding]:
    """Every finding of the section, in the report's order; `measurements` and `story`
    (compile.across) tell the eager step as the other sections measured it."""
    comp = comparison(frame).dropna(subset=["speedup"])
    across = _one_story(measurements, story) if story is not None and len(story) else []
    return gather(_oom(frame), across, _not_told_apart(comp), _speedups(comp), _compile_time(comp),
                  _break_even(comp))
