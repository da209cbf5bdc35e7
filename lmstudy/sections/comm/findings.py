"""The communication section's findings: each a sentence and the rows it was computed from.

The sentences are in findings.j2 beside this file; the functions here choose their numbers and cases.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.contract import wording
from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.sections.comm.tables import CONFIG, bandwidth_table

KEY = tuple(CONFIG)


_say = wording(__name__)


def _tensor(row) -> dict:
    """One row of the bandwidth table as a sentence tells it: size, median time and bus bandwidth, and the
    spread of its repetitions."""
    return {
        "mb": row["size_mb"],
        "ms": row["time_ms"],
        "busbw": row["busbw_gbps"],
        "min_ms": row["min_ms"],
        "max_ms": row["max_ms"],
    }


@finds
def link_share(frame: pd.DataFrame) -> list[Finding]:
    """The best bus bandwidth of each backend, beside the link's limit."""
    table = bandwidth_table(frame)
    out = []
    for backend, rows in table.groupby("backend", sort=True):
        best = rows.loc[rows["busbw_gbps"].idxmax()]
        known = pd.notna(best["link_gbps"])
        out.append(
            Finding(
                _say(
                    "link_share",
                    backend=backend,
                    busbw=best["busbw_gbps"],
                    algbw=best["algbw_gbps"],
                    size_mb=best["size_mb"],
                    world=int(best["world_size"]),
                    share=best["busbw_of_link"] if known else None,
                    link=best["link"],
                    link_gbps=best["link_gbps"] if known else None,
                ),
                rows_behind(rows, "busbw_gbps", "algbw_gbps", "link", "link_gbps", key=KEY),
            )
        )
    return out


@finds
def small_tensors(frame: pd.DataFrame) -> list[Finding]:
    """How far the smallest tensor falls short of the largest: latency against bandwidth."""
    table = bandwidth_table(frame)
    out = []
    for (backend, world), rows in table.groupby(["backend", "world_size"], sort=True):
        if rows["size_mb"].nunique() < 2:
            continue
        small, large = rows.loc[rows["size_mb"].idxmin()], rows.loc[rows["size_mb"].idxmax()]
        ratio = large["busbw_gbps"] / small["busbw_gbps"]
        out.append(
            Finding(
                _say(
                    "small_tensors",
                    backend=backend,
                    world=int(world),
                    small=_tensor(small),
                    large=_tensor(large),
                    ratio=ratio,
                    gain=not ratio <= 1,
                ),
                rows_behind(rows, "time_ms", "busbw_gbps", key=KEY),
            )
        )
    return out


@finds
def more_processes(frame: pd.DataFrame) -> list[Finding]:
    """What more processes do to the largest tensor's time and bus bandwidth."""
    table = bandwidth_table(frame)
    out = []
    for backend, rows in table.groupby("backend", sort=True):
        largest = rows[rows["size_mb"] == rows["size_mb"].max()]
        if largest["world_size"].nunique() < 2:
            continue
        few, many = largest.loc[largest["world_size"].idxmin()], largest.loc[largest["world_size"].idxmax()]
        said = [
            {"world": int(r["world_size"]), "ms": r["time_ms"], "busbw": r["busbw_gbps"]} for r in (few, many)
        ]
        out.append(
            Finding(
                _say("more_processes", backend=backend, size_mb=few["size_mb"], few=said[0], many=said[1]),
                rows_behind(largest, "time_ms", "busbw_gbps", key=KEY),
            )
        )
    return out


@finds
def variation(frame: pd.DataFrame) -> list[Finding]:
    """The largest spread between repetitions, relative to the median."""
    table = bandwidth_table(frame)
    spread = (table["max_ms"] - table["min_ms"]) / table["time_ms"]
    row = table.loc[spread.idxmax()]
    return [
        Finding(
            _say(
                "variation",
                backend=row["backend"],
                world=int(row["world_size"]),
                size_mb=row["size_mb"],
                min_ms=row["min_ms"],
                max_ms=row["max_ms"],
                ms=row["time_ms"],
                rank_spread=row["rank_spread_ms"],
            ),
            rows_behind(table, "time_ms", "min_ms", "max_ms", "rank_spread_ms", key=KEY),
        )
    ]


FINDINGS = (link_share, small_tensors, more_processes, variation)
