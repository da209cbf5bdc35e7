"""The sharding section's findings: each a sentence and the rows it was computed from."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.sections.sharding.tables import CONFIG, KEY, memory_table, step_table
from lmstudy.sections.training_runs import apart


@finds
def state_saved(frame: pd.DataFrame) -> list[Finding]:
    """The optimizer state each rank keeps, whole and sharded, and the memory after the step."""
    table = memory_table(frame)
    after = table[table["phase"] == "after_step"]
    out = []
    for (size, world), rows in after.groupby(["size", "world_size"], sort=False):
        whole, sharded = rows[~rows["sharded"].astype(bool)], rows[rows["sharded"].astype(bool)]
        if whole.empty or sharded.empty:
            continue
        whole, sharded = whole.iloc[0], sharded.iloc[0]
        measured = ""
        if pd.notna(whole["allocated_mb"]):
            measured = (
                f"; the allocator holds {whole['allocated_mb']:.0f} MB after the step whole and "
                f"{sharded['allocated_mb']:.0f} MB sharded (peak {whole['peak_mb']:.0f} against "
                f"{sharded['peak_mb']:.0f} MB)"
            )
        out.append(
            Finding(
                f"{size} on {int(world)} processes: AdamW's state takes {whole['state_mb']:.1f} MB on "
                f"every rank whole and at most {sharded['state_mb']:.1f} MB on a rank sharded "
                f"({sharded['state_mb'] / whole['state_mb']:.0%}; 1/{int(world)} would be "
                f"{1 / world:.0%}){measured}.",
                rows_behind(rows, "state_mb", "allocated_mb", "peak_mb", key=KEY),
            )
        )
    return out


@finds
def step_cost(frame: pd.DataFrame) -> list[Finding]:
    """What sharding does to the step time."""
    table = step_table(frame)
    out = []
    for (size, world), rows in table.groupby(["size", "world_size"], sort=False):
        if rows["sharded"].nunique() < 2:
            continue
        whole = rows.loc[~rows["sharded"].astype(bool)].iloc[0]
        sharded = rows.loc[rows["sharded"].astype(bool)].iloc[0]
        ratio = sharded["step_ms"] / whole["step_ms"]
        if apart(sharded, whole) or apart(whole, sharded):
            verdict = (
                f"({ratio:.2f}x, their 95% intervals apart): each rank updates only its share and then "
                "broadcasts it"
            )
        else:
            verdict = (
                f"({ratio:.2f}x; their 95% intervals, {whole['ci_low_ms']:.1f}–{whole['ci_high_ms']:.1f} and "
                f"{sharded['ci_low_ms']:.1f}–{sharded['ci_high_ms']:.1f} ms, overlap: not told apart)"
            )
        out.append(
            Finding(
                f"{size} on {int(world)} processes: a step takes {whole['step_ms']:.1f} ms with the state "
                f"whole and {sharded['step_ms']:.1f} ms sharded {verdict}.",
                rows_behind(rows, "step_ms", "ci_low_ms", "ci_high_ms", key=tuple(CONFIG)),
            )
        )
    return out


FINDINGS = (state_saved, step_cost)
