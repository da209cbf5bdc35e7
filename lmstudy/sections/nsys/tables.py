"""The kernel profiles section (Nsight Systems): kernel tables, category shares and findings.

The functions that compute its tables (pandas only), and how it names what it measured.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.registry import numbered
from lmstudy.report import contract


def words(runs: pd.DataFrame) -> dict[str, str]:
    """How the section names what it measured: Nsight Systems on a GPU, or torch.profiler (on a
    CPU its operators stand in for kernels, and their time is CPU time, not GPU time); the wording
    is in tables.j2 beside it."""
    backends = set(runs["backend"]) if "backend" in runs else set()
    on_cpu = bool("gpu" in runs and runs["gpu"].astype(str).str.startswith("cpu").any())
    case = {"nsys": backends == {"nsys"}, "on_cpu": on_cpu}
    said = {
        key: contract.words("nsys", "tables.j2", key, **case)
        for key in ("profiler", "short", "column", "time", "kernel")
    }
    return {**said, "title": numbered("nsys", contract.words("nsys", "tables.j2", "title", **case))}


def _with_status(table: pd.DataFrame, column: str = "nsys") -> pd.DataFrame:
    """Show OOM or a missing timer number as such, not as an empty cell; name the profiler's
    columns after the one that ran (`column`)."""
    table = table.copy()
    for col in ("nsys forward ms", "nsys forward kernels ms", "nsys step ms", "capture timer ms"):
        table[col] = table[col].astype(object).where(table["status"] == "ok", table["status"])
    # Where the profile ran out of memory and section 1 has no steady median, say OOM.
    missing = table["status"].where(table["status"] != "ok", "not measured")
    timer = table["timer step ms"].astype(object)
    table["timer step ms"] = timer.where(timer.notna(), missing)
    named = {c: c.replace("nsys ", f"{column} ", 1) for c in table.columns if c.startswith("nsys ")}
    return table.rename(columns={"context_length": "context", **named})
