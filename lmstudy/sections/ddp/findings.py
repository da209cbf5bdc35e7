"""The data-parallel section's findings: each a sentence and the rows it was computed from.

The sentences are in findings.j2 beside this file; the functions here choose their numbers and cases.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.contract import wording
from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.sections.ddp.tables import KEY, step_table
from lmstudy.sections.training_runs import apart

_say = wording(__name__)


def _groups(frame: pd.DataFrame):
    return step_table(frame).groupby(["size", "world_size"], sort=False)


def _apart(faster: pd.Series, slower: pd.Series) -> bool:
    return apart(faster, slower)


def _tied(best: pd.Series, rows: pd.DataFrame) -> dict | None:
    """The versions whose 95% intervals overlap the quickest one's, with its interval; None where none do."""
    tied = [r["version_label"] for _, r in rows.iterrows() if r.name != best.name and not _apart(best, r)]
    if not tied:
        return None
    return {"low": best["ci_low_ms"], "high": best["ci_high_ms"], "names": tied}


def _against_naive(best: pd.Series, rows: pd.DataFrame) -> dict | None:
    """Naive's median over the quickest version's, and whether their intervals are apart; None where naive
    was not run or is the quickest."""
    naive = rows[rows["version_label"] == "naive"]
    if naive.empty or naive.index[0] == best.name:
        return None
    ms = naive["step_ms"].iloc[0]
    return {"ratio": ms / best["step_ms"], "ms": ms, "apart": _apart(best, naive.iloc[0])}


def _without_comm(best: pd.Series, rows: pd.DataFrame) -> dict | None:
    """The step without communication beside the quickest version's; None where it was not run."""
    none = rows[rows["version_label"] == "none"]
    if none.empty:
        return None
    return {"apart": _apart(none.iloc[0], best), "ms": best["no_comm_ms"], "share": best["comm_share"]}


@finds
def fastest(frame: pd.DataFrame) -> list[Finding]:
    """The fastest version that communicates, against naive and against no communication."""
    out = []
    for (size, world), rows in _groups(frame):
        talking = rows[rows["version_label"] != "none"]
        if talking.empty:
            continue
        best = talking.loc[talking["step_ms"].idxmin()]
        out.append(
            Finding(
                _say(
                    "fastest",
                    size=size,
                    world=int(world),
                    best={
                        "label": best["version_label"],
                        "ms": best["step_ms"],
                        "tied": _tied(best, talking),
                    },
                    naive=_against_naive(best, rows),
                    alone=_without_comm(best, rows),
                ),
                rows_behind(rows, "step_ms", "ci_low_ms", "ci_high_ms", "no_comm_ms", "comm_share", key=KEY),
            )
        )
    return out


@finds
def overlap(frame: pd.DataFrame) -> list[Finding]:
    """How much of flat's communication the overlapping versions hide behind the backward."""
    out = []
    for (size, world), rows in _groups(frame):
        flat = rows[rows["version_label"] == "flat"]
        hiding = rows[rows["hidden_share"].notna()]
        if flat.empty or hiding.empty:
            continue
        best = hiding.loc[hiding["hidden_share"].idxmax()]
        none = rows[rows["version_label"] == "none"]
        said = {
            "label": best["version_label"],
            "exposed": best["exposed_comm_ms"],
            "hidden": best["hidden_share"],
            "apart": not (none.empty or not _apart(none.iloc[0], best)),
        }
        out.append(
            Finding(
                _say("overlap", size=size, world=int(world), flat=flat["comm_ms"].iloc[0], best=said),
                rows_behind(rows, "comm_ms", "exposed_comm_ms", "hidden_share", key=KEY),
            )
        )
    return out


@finds
def hidden_by_ranges(frame: pd.DataFrame) -> list[Finding]:
    """The share of each version's own communication time that lay inside the backward's range, read
    from the ranges recorded on each rank (lmstudy.measure.comm_ranges: CPU runs only)."""
    out = []
    for (size, world), rows in _groups(frame):
        ranged = rows[rows["hidden_share_ranges"].notna()]
        if ranged.empty:
            continue
        shares = [
            (r["version_label"], r["hidden_share_ranges"], r["comm_span_ms"]) for _, r in ranged.iterrows()
        ]
        out.append(
            Finding(
                _say("hidden_by_ranges", size=size, world=int(world), shares=shares),
                rows_behind(ranged, "comm_span_ms", "hidden_share_ranges", key=KEY),
            )
        )
    return out


@finds
def buckets(frame: pd.DataFrame) -> list[Finding]:
    """Which bucket size is fastest, and the slowest one."""
    out = []
    for (size, world), rows in _groups(frame):
        bucketed = rows[rows["version_label"].str.startswith("bucketed")]
        if len(bucketed) < 2:
            continue
        best, worst = bucketed.loc[bucketed["step_ms"].idxmin()], bucketed.loc[bucketed["step_ms"].idxmax()]
        out.append(
            Finding(
                _say(
                    "buckets",
                    size=size,
                    world=int(world),
                    best={"label": best["version_label"], "ms": best["step_ms"]},
                    worst={"label": worst["version_label"], "ms": worst["step_ms"]},
                    apart=_apart(best, worst),
                    tied_with=_tied(best, bucketed.drop(worst.name)),
                ),
                rows_behind(bucketed, "step_ms", "ci_low_ms", "ci_high_ms", key=KEY),
            )
        )
    return out


FINDINGS = (fastest, overlap, hidden_by_ranges, buckets)
