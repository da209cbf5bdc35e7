"""Section 4 in the comparison of two runs: each snapshot's peak, and memory at the peak by kind."""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.analyse.compare import tables as T
from lmstudy.analyse.compare.runs import Run
from lmstudy.registry import numbered, reference
from lmstudy.report import compare_cells as cells
from lmstudy.report.contract import ComparedRuns, wording
from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.report.labels import PASS_LABELS
from lmstudy.report.render import Findings, Section, Table, Text

MEMORY_KEY = ["size", "context_length", "pass", "precision"]


_say = wording(__name__)


MEMORY_KINDS = (
    "parameters",
    "gradients",
    "optimizer_state",
    "autocast_cache",
    "activations",
    "temporaries",
    "other",
    "before_recording",
    "allocator_rounding",
)


def memory(a: Run, b: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Section 4: each configuration's peak in both runs, and memory at the peak by kind."""
    joined = T.join_table(a, b, "memory", MEMORY_KEY, ["peak_bytes", *(f"{k}_bytes" for k in MEMORY_KINDS)])
    if joined.empty:
        return joined, joined
    peaks = joined[MEMORY_KEY].copy()
    peaks["status_a"], peaks["status_b"] = joined["status_a"], joined["status_b"]
    statuses = zip(joined["status_a"], joined["status_b"], strict=True)
    peaks["presence"] = [T.presence(x, y) for x, y in statuses]
    for side in ("a", "b"):
        column = f"peak_bytes_{side}"
        values = joined[column] if column in joined else pd.Series(math.nan, index=joined.index)
        peaks[f"peak_gib_{side}"] = (values / 2**30).where(joined[f"status_{side}"] == "ok")
    peaks["ratio"] = peaks["peak_gib_b"] / peaks["peak_gib_a"]
    kinds = []
    both = peaks["presence"] == ""
    for kind in MEMORY_KINDS:
        ca, cb = f"{kind}_bytes_a", f"{kind}_bytes_b"
        if ca not in joined and cb not in joined:
            continue
        part = joined.loc[both, MEMORY_KEY].copy()
        part["kind"] = kind
        part["gib_a"] = (joined.loc[both, ca] if ca in joined else math.nan) / 2**30
        part["gib_b"] = (joined.loc[both, cb] if cb in joined else math.nan) / 2**30
        kinds.append(part)
    kinds = pd.concat(kinds, ignore_index=True) if kinds else pd.DataFrame()
    if not kinds.empty:
        kinds = kinds.sort_values([*MEMORY_KEY], kind="stable").reset_index(drop=True)
        kinds["change_gib"] = kinds["gib_b"] - kinds["gib_a"]
    return peaks, kinds


@finds
def _peak_ratio(peaks: pd.DataFrame) -> list[Finding]:
    """B's peak over A's, over the snapshots in both runs; where none is in both, what each run had."""
    measured = peaks[peaks["presence"] == ""]
    if not len(measured):
        return [
            Finding(
                _say("no_snapshot_in_both", states=cells.counts(peaks["presence"])),
                rows_behind(peaks, "status_a", "status_b", "presence"),
            )
        ]
    return [
        Finding(
            _say(
                "peak_ratio",
                median=measured["ratio"].median(),
                snapshots=len(measured),
                lowest=measured["ratio"].min(),
                highest=measured["ratio"].max(),
            ),
            rows_behind(measured, "peak_gib_a", "peak_gib_b", "ratio"),
        )
    ]


# Its comparison's findings, each with the rows of A and B behind it.
FINDINGS = (_peak_ratio,)


def _section_memory(a, b) -> Section:
    section = Section("memory", numbered("memory", "Memory peaks"))
    peaks, kinds = memory(a, b)
    if peaks.empty:
        return section.add(Text(_say("neither", where=reference("memory"))))
    section.add(Findings(_peak_ratio(peaks)))
    table = pd.DataFrame(
        {
            "size": peaks["size"],
            "context": peaks["context_length"],
            "pass": peaks["pass"].map(PASS_LABELS),
            "precision": peaks["precision"],
            "A peak GiB": cells.shown(peaks["peak_gib_a"], peaks["status_a"]),
            "B peak GiB": cells.shown(peaks["peak_gib_b"], peaks["status_b"]),
            "B/A": peaks["ratio"],
            "state": peaks["presence"].replace("", "both measured"),
        }
    )
    section.add(Table(_say("peaks_title"), table, name="memory_peaks"))
    if not kinds.empty:
        shown = kinds.rename(
            columns={"context_length": "context", "gib_a": "A GiB", "gib_b": "B GiB", "change_gib": "B−A GiB"}
        )
        shown["pass"] = shown["pass"].map(PASS_LABELS)
        section.add(Table(_say("kinds_title"), shown, name="memory_kinds"))
    return section


def section(runs: ComparedRuns) -> Section:
    return _section_memory(runs.a, runs.b)
