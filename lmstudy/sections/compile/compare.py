"""Section 6 in the comparison of two runs: eager and compiled step times.

The numbers, rows and cases are chosen here; the wording is in compare.j2 beside it."""

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

COMPILE_KEY = ["size", "context_length", "precision", "attention", "pass", "mode"]


_say = wording(__name__)


def compile_rows(a: Run, b: Run, min_effect: float, noise=None) -> pd.DataFrame:
    """Section 6: eager and compiled medians per size, precision, attention, pass, with a verdict
    per measure."""
    keep = ("median_ms", "step_times_ms", "first_step_excess_s", *T.GPU_COLUMNS)
    joined = T.join_table(a, b, "compile", COMPILE_KEY, keep)
    if joined.empty:
        return joined
    rows = T.sample_comparisons(
        joined, COMPILE_KEY, (("", "median_ms", "step_times_ms", ""),), min_effect, noise
    )
    for side in ("a", "b"):
        column = f"first_step_excess_s_{side}"
        rows[f"compile_s_{side}"] = (
            joined[column].where((joined["mode"] == "compiled") & (joined[f"status_{side}"] == "ok"))
            if column in joined
            else math.nan
        )
    return rows


def compile_speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """Eager over compiled median, in each run, per size, context, precision, attention and pass."""
    if rows.empty:
        return rows
    key = [k for k in COMPILE_KEY if k != "mode"]
    out = {}
    for side in ("a", "b"):
        wide = rows.pivot_table(
            index=key, columns="mode", values=f"median_ms_{side}", aggfunc="first", observed=True
        )
        if {"eager", "compiled"} <= set(wide.columns):
            out[f"speedup_{side}"] = wide["eager"] / wide["compiled"]
        compile_s = rows[rows["mode"] == "compiled"].set_index(key)[f"compile_s_{side}"]
        out[f"compile_s_{side}"] = compile_s
    frame = pd.DataFrame(out)
    return frame.reset_index() if not frame.empty else frame


@finds
def _compile_speedups(speedups: pd.DataFrame) -> list[Finding]:
    """torch.compile's median speed-up over eager in A and in B, over the configurations with both."""
    if speedups.empty or not {"speedup_a", "speedup_b"} <= set(speedups):
        return []
    both = speedups.dropna(subset=["speedup_a", "speedup_b"])
    if not len(both):
        return []
    return [
        Finding(
            _say(
                "speedups",
                a=both["speedup_a"].median(),
                b=both["speedup_b"].median(),
                configurations=len(both),
            ),
            rows_behind(both, "speedup_a", "speedup_b", key=[k for k in COMPILE_KEY if k != "mode"]),
        )
    ]


# Its comparison's findings, each with the rows of A and B behind it.
FINDINGS = (_compile_speedups,)


def _section_compile(a, b, min_effect: float, noise) -> Section:
    section = Section("compile", numbered("compile", _say("title")))
    rows = compile_rows(a, b, min_effect, noise)
    if rows.empty:
        return section.add(Text(_say("no_results", where=reference("compile"))))
    section.add(Text(_say("intro")))
    speedups = compile_speedups(rows)
    section.add(Findings(_compile_speedups(speedups)))
    table = cells.summary_table(
        rows,
        {
            "size": "size",
            "context_length": "context",
            "precision": "precision",
            "attention": "attention",
            "pass": "pass",
            "mode": "mode",
        },
    )
    table["pass"] = table["pass"].map(PASS_LABELS)
    section.add(Table(_say("step_times_title"), table, name="compile_step_times"))
    if not speedups.empty:
        shown = speedups.rename(
            columns={
                "context_length": "context",
                "speedup_a": "A speed-up ×",
                "speedup_b": "B speed-up ×",
                "compile_s_a": "A compile s",
                "compile_s_b": "B compile s",
            }
        )
        shown["pass"] = shown["pass"].map(PASS_LABELS)
        section.add(Table(_say("speedups_title"), shown, name="compile_speedups"))
    return section


def section(runs: ComparedRuns) -> Section:
    return _section_compile(runs.a, runs.b, runs.min_effect, runs.noise)
