"""The distributed sections in the comparison of two runs: each configuration both runs measured, B's
time over A's with its interval and a verdict (faster, slower, same, undecided), as the other sections
give one (lmstudy.analyse.compare.verdict.compare_processes). The processes are each run's ranks: each
rank's own times (repetitions of an all-reduce, timed steps) are one process's samples; the ranks of
one group share its start, so the verdict sees the variation between ranks and repetitions of one
group per run, not between fresh groups."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from lmstudy.analyse.compare import verdict as V
from lmstudy.registry import numbered
from lmstudy.report import compare_cells as cells
from lmstudy.report.contract import ComparedRuns, wording
from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.report.render import Findings, Section, Table, Text
from lmstudy.sections.comm.tables import CONFIG

_say = wording(__name__)


def rank_samples(frame: pd.DataFrame, key: list[str], seconds: str) -> dict[tuple, list[list[float]]]:
    """Per configuration, each rank's times (in seconds) as one list."""
    out = {}
    for config, part in frame.groupby(key, sort=False):
        out[config] = [group[seconds].dropna().tolist() for _, group in part.groupby("rank", sort=True)]
    return out


def judged(a: pd.DataFrame, b: pd.DataFrame, key: list[str], seconds: str, min_effect: float) -> pd.DataFrame:
    """Each configuration in both runs: each side's median (ms), B / A, its interval and the verdict."""
    if a.empty or b.empty:
        return pd.DataFrame()
    samples_a, samples_b = rank_samples(a, key, seconds), rank_samples(b, key, seconds)
    rows = []
    for config in (c for c in samples_a if c in samples_b):
        compared = V.compare_processes(samples_a[config], samples_b[config], min_effect)
        rows.append(
            {
                **dict(zip(key, config, strict=True)),
                "median_ms_a": compared.median_a * 1e3,
                "median_ms_b": compared.median_b * 1e3,
                "ratio": compared.ratio,
                "ci_low": compared.ci_low,
                "ci_high": compared.ci_high,
                "processes_a": compared.processes_a,
                "processes_b": compared.processes_b,
                "verdict": compared.verdict,
            }
        )
    return pd.DataFrame(rows)


def shown(rows: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The comparison's table as the report shows it."""
    table = rows[key].copy()
    table["A median ms"] = rows["median_ms_a"]
    table["B median ms"] = rows["median_ms_b"]
    table["B/A"] = rows["ratio"]
    table["interval of B/A"] = rows.apply(cells.interval, axis=1)
    table["ranks A/B"] = cells.processes(rows)
    table["verdict"] = rows["verdict"]
    return table.reset_index(drop=True)


@finds
def verdicts(rows: pd.DataFrame, what: str, key: tuple[str, ...]) -> list[Finding]:
    """How many configurations are faster, slower, the same or undecided, and the decided ratio."""
    if rows.empty:
        return []
    return [
        Finding(
            _say(
                "verdicts",
                what=what,
                configurations=len(rows),
                counts=cells.counts(rows["verdict"]),
                ratio=cells.decided_ratio(rows),
            ),
            rows_behind(rows, "median_ms_a", "median_ms_b", "ratio", "ci_low", "ci_high", "verdict", key=key),
        )
    ]


def build(
    runs: ComparedRuns, name: str, title: str, prepare: Callable, key: list[str], seconds: str, what: str
) -> Section:
    """A distributed section's comparison: `prepare` turns a run's rows into the rows whose `seconds`
    are timed, per `key` and rank; a table of verdicts and their counts."""
    section = Section(name, numbered(name, title))
    a, b = (prepare(run[name]) if not run[name].empty else run[name] for run in (runs.a, runs.b))
    rows = judged(a, b, key, seconds, runs.min_effect)
    if rows.empty:
        return section.add(Text(_say("nothing_in_common", title=title.lower())))
    section.add(Text(_say("how", what=what, band=cells.band_words(runs.min_effect))))
    section.add(Findings(verdicts(rows, what, tuple(key))))
    section.add(Table(_say("table_title", what=what), shown(rows, key), name=f"{name}_compared"))
    return section


def section(runs: ComparedRuns) -> Section:
    return build(
        runs, "comm", "Communication: all-reduce", lambda frame: frame, CONFIG, "seconds", _say("what")
    )


FINDINGS = (verdicts,)
