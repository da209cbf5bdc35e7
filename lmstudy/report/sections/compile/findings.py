"""Section 6, the whole model under torch.compile.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.sections.compile.tables import comparison
from lmstudy.report.sections.labels import PASS_LABELS, faster


def findings(frame: pd.DataFrame) -> list[str]:
    from lmstudy.report.answers import count, span

    items = []
    oom = frame[frame["status"] == "OOM"]
    if len(oom):
        names = sorted(
            {f"{r['size']} {r['precision']} {r['mode']} {PASS_LABELS[r['pass']]}" for _, r in oom.iterrows()}
        )
        items.append(f"{count(len(oom), 'measurement')} ran out of memory: {', '.join(names)}.")
    comp = comparison(frame).dropna(subset=["speedup"])
    unclear = (
        (comp[comp["has_interval"] & ~comp["apart"]],
         "are within noise of each other (their intervals overlap)"),
        (comp[~comp["has_interval"]], "are not compared: a side has no interval (one process)"),
    )
    for rows, why in unclear:
        if len(rows):
            names = ", ".join(
                f"{r['size']} {r['precision']} {PASS_LABELS[r['pass']]}" for _, r in rows.iterrows()
            )
            items.append(f"Compiled and eager {why} in {len(rows)} of {len(comp)} configurations: {names}.")
    for pass_name, part in comp[comp["apart"]].groupby("pass"):
        lo, hi = part.loc[part["speedup"].idxmin()], part.loc[part["speedup"].idxmax()]
        spread = (
            f"; from {faster(lo['speedup'])} ({lo['size']} {lo['precision']}) to "
            f"{faster(hi['speedup'])} ({hi['size']} {hi['precision']})"
            if len(part) > 1
            else f" ({lo['size']} {lo['precision']})"
        )
        if len(part) > 1:
            items.append(
                f"Compiled, the {PASS_LABELS[pass_name]} is {faster(part['speedup'].median())} than eager "
                f"(median of the {len(part)} configurations told apart){spread}."
            )
        else:
            name = PASS_LABELS[pass_name]
            items.append(f"Compiled, the {name} is {faster(lo['speedup'])} than eager{spread}.")
    if comp["compile_s"].notna().any():
        top = comp.loc[comp["compile_s"].idxmax()]
        items.append(
            f"Compiling costs {comp['compile_s'].median():.1f} s"
            + (
                f" (median) on the first step, up to {top['compile_s']:.1f} s"
                if len(comp) > 1
                else " on the first step"
            )
            + f" ({top['size']} {top['precision']} {PASS_LABELS[top['pass']]})."
        )
    paid = comp["break_even_steps"].dropna()
    if len(paid):
        spread = span(paid.min(), paid.max(), ".0f")
        items.append(
            f"Where compiling helps, it pays for itself after {paid.median():.0f} steps"
            + (f" (median; {spread})." if "–" in spread else ".")
        )
    return items
