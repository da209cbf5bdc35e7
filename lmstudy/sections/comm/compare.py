"""The distributed sections in the comparison of two runs: each section's own table in A and in B,
joined on its configuration, with B's measure over A's (no verdict from the variation: these jobs
run once, and their spread is shown in each run's own report)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from lmstudy.registry import numbered
from lmstudy.report.contract import ComparedRuns
from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.report.render import Findings, Section, Table, Text
from lmstudy.sections.comm.tables import CONFIG, bandwidth_table


def side_by_side(
    a: pd.DataFrame, b: pd.DataFrame, table: Callable, key: list[str], measure: str
) -> pd.DataFrame:
    """`table` of each run's rows, joined on `key` (configurations in both), `measure` of each and B / A."""
    if a.empty or b.empty:
        return pd.DataFrame()
    left = table(a).set_index(key)[[measure]].add_suffix("_a")
    right = table(b).set_index(key)[[measure]].add_suffix("_b")
    joined = left.join(right, how="inner")
    joined["ratio"] = joined[f"{measure}_b"] / joined[f"{measure}_a"]
    return joined.reset_index()


@finds
def median_ratio(rows: pd.DataFrame, measure: str, what: str, key: tuple[str, ...]) -> list[Finding]:
    """The median of B / A over the configurations both runs measured."""
    if rows.empty:
        return []
    return [
        Finding(
            f"{what}: B's over A's is {rows['ratio'].median():.2f}x at the median of the "
            f"{len(rows)} configurations both runs measured (from {rows['ratio'].min():.2f}x to "
            f"{rows['ratio'].max():.2f}x).",
            rows_behind(rows, f"{measure}_a", f"{measure}_b", "ratio", key=key),
        )
    ]


def build(
    runs: ComparedRuns, name: str, title: str, table: Callable, key: list[str], measure: str, what: str
) -> Section:
    """A distributed section's comparison: its table side by side and the median ratio."""
    section = Section(name, numbered(name, title))
    rows = side_by_side(runs.a[name], runs.b[name], table, key, measure)
    if rows.empty:
        return section.add(Text(f"The two runs have no {title.lower()} configuration in common."))
    section.add(
        Text(
            f"{what} in A and in B per configuration both measured, and B / A; no verdict is "
            "drawn from the variation (each run's report shows its spread)."
        )
    )
    section.add(Findings(median_ratio(rows, measure, what, tuple(key))))
    section.add(Table(f"{what}, B against A", rows, name=f"{name}_compared"))
    return section


def section(runs: ComparedRuns) -> Section:
    return build(
        runs,
        "comm",
        "Communication: all-reduce",
        bandwidth_table,
        CONFIG,
        "busbw_gbps",
        "All-reduce bus bandwidth (GB/s)",
    )


FINDINGS = (median_ratio,)
