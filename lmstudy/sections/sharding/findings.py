"""The sharding section's findings: each a sentence and the rows it was computed from.

The sentences are in findings.j2 beside this file; the functions here choose their numbers and cases.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.contract import wording
from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.sections.sharding.tables import CONFIG, KEY, memory_table, step_table
from lmstudy.sections.training_runs import apart

_say = wording(__name__)


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
        said = [
            {"state": r["state_mb"], "allocated": r["allocated_mb"], "peak": r["peak_mb"]}
            for r in (whole, sharded)
        ]
        out.append(
            Finding(
                _say(
                    "state_saved",
                    size=size,
                    world=int(world),
                    whole=said[0],
                    sharded=said[1],
                    share=sharded["state_mb"] / whole["state_mb"],
                    even=1 / world,
                    measured=pd.notna(whole["allocated_mb"]),
                ),
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
        said = [
            {"ms": r["step_ms"], "low": r["ci_low_ms"], "high": r["ci_high_ms"]} for r in (whole, sharded)
        ]
        out.append(
            Finding(
                _say(
                    "step_cost",
                    size=size,
                    world=int(world),
                    whole=said[0],
                    sharded=said[1],
                    ratio=sharded["step_ms"] / whole["step_ms"],
                    apart=apart(sharded, whole) or apart(whole, sharded),
                ),
                rows_behind(rows, "step_ms", "ci_low_ms", "ci_high_ms", key=tuple(CONFIG)),
            )
        )
    return out


FINDINGS = (state_saved, step_cost)
