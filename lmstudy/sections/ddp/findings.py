"""The data-parallel section's findings: each a sentence and the rows it was computed from."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.sections.ddp.tables import KEY, step_table
from lmstudy.sections.training_runs import apart


def _groups(frame: pd.DataFrame):
    return step_table(frame).groupby(["size", "world_size"], sort=False)


def _apart(faster: pd.Series, slower: pd.Series) -> bool:
    return apart(faster, slower)


def _tied(best: pd.Series, rows: pd.DataFrame) -> str:
    """Where the 95% intervals of the quickest version and others overlap, the sentence that says so."""
    tied = [r["version_label"] for _, r in rows.iterrows() if r.name != best.name and not _apart(best, r)]
    if not tied:
        return ""
    return (f" (its 95% interval, {best['ci_low_ms']:.1f}–{best['ci_high_ms']:.1f} ms, overlaps "
            f"{', '.join(tied)}: not told apart from {'it' if len(tied) == 1 else 'them'})")


@finds
def fastest(frame: pd.DataFrame) -> list[Finding]:
    """The fastest version that communicates, against naive and against no communication."""
    out = []
    for (size, world), rows in _groups(frame):
        talking = rows[rows["version_label"] != "none"]
        if talking.empty:
            continue
        best = talking.loc[talking["step_ms"].idxmin()]
        naive = rows[rows["version_label"] == "naive"]
        against = ""
        if not naive.empty and naive.index[0] != best.name:
            ratio = naive["step_ms"].iloc[0] / best["step_ms"]
            decided = "" if _apart(best, naive.iloc[0]) else ", their intervals overlapping"
            against = f", {ratio:.2f}x naive's median ({naive['step_ms'].iloc[0]:.1f} ms{decided})"
        alone = ""
        none = rows[rows["version_label"] == "none"]
        if not none.empty and _apart(none.iloc[0], best):
            alone = (
                f"; a step without communication takes {best['no_comm_ms']:.1f} ms, so "
                f"{best['comm_share']:.0%} of the step is communication the backward did not hide"
            )
        elif not none.empty:
            alone = (
                f"; its interval overlaps the step without communication's ({best['no_comm_ms']:.1f} ms): "
                "the communication it adds is within the steps' own variation here"
            )
        out.append(
            Finding(
                f"{size} on {int(world)} processes: {best['version_label']} has the quickest median "
                f"data-parallel step, {best['step_ms']:.1f} ms{_tied(best, talking)}{against}{alone}.",
                rows_behind(rows, "step_ms", "ci_low_ms", "ci_high_ms", "no_comm_ms", "comm_share",
                            key=KEY),
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
        exposed = (
            f"exposes {best['exposed_comm_ms']:.1f} ms beyond the step without communication, so it "
            f"hides {best['hidden_share']:.0%} of it behind the backward"
        )
        none = rows[rows["version_label"] == "none"]
        if none.empty or not _apart(none.iloc[0], best):
            exposed = (
                "is not told apart from the step without communication (their 95% intervals overlap): "
                "what it exposes is within the steps' own variation"
            )
        out.append(
            Finding(
                f"{size} on {int(world)} processes: flat's all-reduce after the backward takes "
                f"{flat['comm_ms'].iloc[0]:.1f} ms; {best['version_label']} {exposed}.",
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
        shares = ", ".join(
            f"{r['version_label']} {r['hidden_share_ranges']:.0%} of {r['comm_span_ms']:.1f} ms"
            for _, r in ranged.iterrows()
        )
        out.append(
            Finding(
                f"{size} on {int(world)} processes, from the ranges of the backward and of each all-reduce "
                f"(issue to completion, on each rank's clock): the share of a step's communication time "
                f"that lay inside the backward is {shares}.",
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
        apart = "" if _apart(best, worst) else "; their intervals overlap: not told apart"
        out.append(
            Finding(
                f"{size} on {int(world)} processes: of the bucket sizes, {best['version_label']} has the "
                f"quickest median step ({best['step_ms']:.1f} ms) and {worst['version_label']} the slowest "
                f"({worst['step_ms']:.1f} ms){apart}{_tied(best, bucketed.drop(worst.name))}.",
                rows_behind(bucketed, "step_ms", "ci_low_ms", "ci_high_ms", key=KEY),
            )
        )
    return out


FINDINGS = (fastest, overlap, hidden_by_ranges, buckets)
