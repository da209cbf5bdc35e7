"""Section 6, the whole model under torch.compile.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import of_all
from lmstudy.report.finding import Finding, finds, gather, rows_behind, with_used
from lmstudy.report.labels import PASS_LABELS, faster
from lmstudy.sections.compile.across import KEY as ACROSS_KEY
from lmstudy.sections.compile.tables import KEY, comparison

MEASUREMENT = (*KEY, "mode")  # a configuration's key and its mode: one measurement

# What a comparison of eager and compiled is told from: the medians, their intervals and the speed-up.
COMPARED = ("eager_ms", "eager_ci_low_ms", "eager_ci_high_ms", "compiled_ms", "compiled_ci_low_ms",
            "compiled_ci_high_ms", "speedup")


@finds
def _oom(frame: pd.DataFrame) -> list[Finding]:
    from lmstudy.report.answers import count

    oom = frame[frame["status"] == "OOM"]
    if not len(oom):
        return []
    names = sorted(
        {f"{r['size']} {r['precision']} {r['mode']} {PASS_LABELS[r['pass']]}" for _, r in oom.iterrows()}
    )
    return [Finding(f"{count(len(oom), 'measurement')} ran out of memory: {', '.join(names)}.",
                    rows_behind(oom, "status", key=MEASUREMENT))]


@finds
def _not_told_apart(comp: pd.DataFrame) -> list[Finding]:
    """The configurations whose eager and compiled steps are not ranked: overlapping or missing intervals."""
    unclear = (
        (comp[comp["has_interval"] & ~comp["apart"]],
         "are within noise of each other (their intervals overlap)"),
        (comp[~comp["has_interval"]], "are not compared: a side has no interval (one process)"),
    )
    items = []
    for rows, why in unclear:
        if len(rows):
            names = ", ".join(
                f"{r['size']} {r['precision']} {PASS_LABELS[r['pass']]}" for _, r in rows.iterrows()
            )
            items.append(Finding(
                f"Compiled and eager {why} in {of_all(len(rows), len(comp), 'configuration')}: {names}.",
                with_used(rows_behind(comp, *COMPARED, "has_interval", "apart", key=MEASUREMENT), rows)))
    return items


@finds
def _speedups(comp: pd.DataFrame) -> list[Finding]:
    """Per pass, compiled over eager where the two are told apart: those configurations, with the speed-up."""
    items = []
    for pass_name, part in comp[comp["apart"]].groupby("pass"):
        lo, hi = part.loc[part["speedup"].idxmin()], part.loc[part["speedup"].idxmax()]
        spread = (
            f"; from {faster(lo['speedup'])} ({lo['size']} {lo['precision']}) to "
            f"{faster(hi['speedup'])} ({hi['size']} {hi['precision']})"
            if len(part) > 1
            else f" ({lo['size']} {lo['precision']})"
        )
        if len(part) > 1:
            text = (
                f"Compiled, the {PASS_LABELS[pass_name]} is {faster(part['speedup'].median())} than eager "
                f"measured in this section (median of the {len(part)} configurations told apart){spread}."
            )
        else:
            name = PASS_LABELS[pass_name]
            text = (f"Compiled, the {name} is {faster(lo['speedup'])} than eager measured in this "
                    f"section{spread}.")
        items.append(Finding(text, rows_behind(part, *COMPARED, key=MEASUREMENT)))
    return items


@finds
def _compile_time(comp: pd.DataFrame) -> list[Finding]:
    """The compile's cost: the compiled first step's excess over its steady step, per configuration."""
    if not comp["compile_s"].notna().any():
        return []
    top = comp.loc[comp["compile_s"].idxmax()]
    return [Finding(
        f"Compiling costs {comp['compile_s'].median():.1f} s"
        + (
            f" (median) on the first step, up to {top['compile_s']:.1f} s"
            if len(comp) > 1
            else " on the first step"
        )
        + f" ({top['size']} {top['precision']} {PASS_LABELS[top['pass']]}).",
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
        names = ", ".join(f"{r['size']} {r['precision']} {PASS_LABELS[r['pass']]}"
                          for _, r in part.iterrows())
        if source == "not told apart":
            text = (f"Compiling has no break-even in {of_all(len(part), len(comp), 'configuration')} "
                    f"({names}): compiled and eager are told apart neither in wall time nor on the GPU.")
        elif not len(paid):
            continue
        else:
            spread = span(paid.min(), paid.max(), ",.0f")
            against = ("its wall-time gain" if source == "wall time" else
                       "its GPU-time gain, wall time deciding none")
            text = (f"Compiling pays for itself after {spread} steps against {against} ({names}"
                    + (f"; median {paid.median():,.0f}" if len(paid) > 1 else "") + ").")
        items.append(Finding(text, rows_behind(part, *behind, key=MEASUREMENT)))
    return items


def _ms(row) -> str:
    low, high = row.get("ci_low_ms"), row.get("ci_high_ms")
    interval = f" ({low:.3g}–{high:.3g})" if pd.notna(low) and pd.notna(high) else ""
    return f"{row['median_ms']:.3g} ms{interval}"


@finds
def _one_story(measurements: pd.DataFrame, story: pd.DataFrame) -> list[Finding]:
    """Each eager configuration measured in several sections: the measurements side by side, whether
    their intervals disagree and by how much, and the speed-up against each."""
    from lmstudy.report.answers import count, span

    items = []
    for _, cell in story.iterrows():
        key = {k: cell[k] for k in ACROSS_KEY}
        part = measurements.merge(pd.DataFrame([key]), on=ACROSS_KEY)
        name = (f"{cell['size']} ctx {int(cell['context_length'])} {cell['precision']} "
                f"{PASS_LABELS.get(cell['pass'], cell['pass'])}, batch {int(cell['batch_size'])}")
        text = (f"The eager {name} was measured in {count(len(part), 'section')}: "
                + ", ".join(f"{_ms(r)} in {r['source']}" for _, r in part.iterrows()))
        if cell["disagree"]:
            text += (f". Their intervals do not all overlap: the jobs disagree by up to "
                     f"{(cell['max_over_min'] - 1) * 100:.0f}% (each interval holds for its own job's "
                     "processes; between jobs the host's load moves a host-bound step further)")
        else:
            text += ". Their intervals overlap: one story within noise"
        text += (f". Against them compiled is {span(cell['speedup_min'], cell['speedup_max'])}× as fast "
                 f"(an interval covering every eager measurement: "
                 f"{span(cell['covering_low'], cell['covering_high'], '.3g')}×"
                 + (", which holds 1: not told apart" if cell["covering_low"] <= 1 <= cell["covering_high"]
                    else "") + ")")
        if pd.notna(cell.get("gpu_speedup")):
            text += f"; on the GPU (busy time), {cell['gpu_speedup']:.2f}×"
        items.append(Finding(text + ".", part.assign(disagree=cell["disagree"],
                                                     max_over_min=cell["max_over_min"])))
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
