"""Each section's numbers of two runs matched by configuration: the joins, presence and verdicts
every section's comparison (lmstudy/report/sections/<name>/compare.py) uses.

A joined frame has one row per configuration found in either run, so a
configuration measured in one run only, or out of memory in one, is a row
that says so rather than a row dropped.
"""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.analyse.compare import verdict as V
from lmstudy.analyse.compare.runs import Run

MISSING_STATUS = "not measured"


def presence(status_a, status_b) -> str:
    """The verdict of a row that cannot be compared, or '' when both sides are ok."""
    a_missing, b_missing = pd.isna(status_a), pd.isna(status_b)
    if a_missing and b_missing:
        return "in neither run"
    if a_missing:
        return "only in B"
    if b_missing:
        return "only in A"
    if status_a == "ok" and status_b == "ok":
        return ""
    if status_a == status_b:
        return f"{status_a} in both"
    if status_b == "ok":
        return f"{status_a} in A"
    if status_a == "ok":
        return f"{status_b} in B"
    return f"{status_a} in A, {status_b} in B"


def join(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Outer join of A's and B's rows on `key` (columns suffixed _a, _b); A's order, then B's extra rows."""
    a = a.assign(_in_a=True).set_index(key)
    b = b.assign(_in_b=True).set_index(key)
    joined = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer", sort=False)
    order = list(a.index) + [k for k in b.index if k not in set(a.index)]
    return joined.reindex(order).reset_index()


def join_table(a: Run, b: Run, table: str, key: list[str], columns) -> pd.DataFrame:
    """Both runs' `table` (those of `columns` it has, and status), joined on `key` (see join)."""
    parts = []
    for run in (a, b):
        frame = run[table]
        if frame.empty:
            parts.append(pd.DataFrame(columns=[*key, "status"]))
        else:
            parts.append(frame[[c for c in (*key, "status", *columns) if c in frame]])
    return join(parts[0], parts[1], key)


def _result_columns(result: V.Comparison) -> dict:
    return {
        "ratio": result.ratio,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "verdict": result.verdict,
        "processes_a": result.processes_a,
        "processes_b": result.processes_b,
    }


EMPTY_RESULT = {
    "ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan, "processes_a": 0, "processes_b": 0,
}


def compared(cell_a, cell_b, min_effect: float) -> dict:
    """The comparison columns of two rows' per-process samples (lmstudy.analyse.compare.verdict)."""
    return _result_columns(V.compare_processes(V.processes_of(cell_a), V.processes_of(cell_b), min_effect))


def sample_comparisons(joined, key, parts, min_effect) -> pd.DataFrame:
    """Rows compared from their per-process samples: one per key x part.

    `parts`: (part's name, its median column, its per-process samples
    column). A row whose samples were
    not kept (a run made before they were) shows the ratio of medians with
    the verdict "one process".
    """
    rows = []
    for _, row in joined.iterrows():
        unmatched = presence(row.get("status_a"), row.get("status_b"))
        for part, median, samples in parts:
            out = {k: row[k] for k in key}
            if part:
                out["part"] = part
            out["median_ms_a"] = row.get(f"{median}_a") if row.get("status_a") == "ok" else math.nan
            out["median_ms_b"] = row.get(f"{median}_b") if row.get("status_b") == "ok" else math.nan
            if unmatched:
                out.update(EMPTY_RESULT, verdict=unmatched)
                rows.append(out)
                continue
            out.update(compared(row.get(f"{samples}_a"), row.get(f"{samples}_b"), min_effect))
            if out["verdict"] == V.TOO_FEW and out["median_ms_a"] > 0 and out["median_ms_b"] > 0:
                out.update(ratio=out["median_ms_b"] / out["median_ms_a"], verdict=V.ONE_PROCESS)
            rows.append(out)
    return pd.DataFrame(rows)
