"""Section 7 in the comparison of two runs: the ladder's rungs, or for runs without a ladder
table, its rungs among the timing variants."""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.analyse.compare import tables as T
from lmstudy.analyse.compare import verdict as V
from lmstudy.analyse.compare.runs import Run
from lmstudy.registry import numbered
from lmstudy.report import compare_cells as cells
from lmstudy.report.contract import ComparedRuns, wording
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.report.render import Findings, Section, Table, Text
from lmstudy.sections.timing.compare import matched as matched_timing

LADDER_KEY = ["size", "context_length", "rung_key"]


_say = wording(__name__)


def ladder_rows(a: Run, b: Run, min_effect: float, noise: V.Noise | None = None) -> pd.DataFrame:
    """Section 7 (ladder/ladder.csv): each size's rungs, matched by LADDER_KEY, a verdict per measure
    (lmstudy.analyse.compare.tables.judge); each run's share of its own matmul rate beside them."""
    columns = [
        "rung",
        "status",
        "median_ms",
        "step_times_ms",
        "share_of_matmul",
        "matmul_tflops",
        *T.GPU_COLUMNS,
    ]
    parts = [
        run["ladder"][[*LADDER_KEY, *(c for c in columns if c in run["ladder"])]]
        if not run["ladder"].empty
        else pd.DataFrame(columns=[*LADDER_KEY, "status"])
        for run in (a, b)
    ]
    joined = T.join(parts[0], parts[1], LADDER_KEY)
    rows = []
    for _, row in joined.iterrows():
        out = {k: row[k] for k in LADDER_KEY}
        out["rung"] = row.get("rung_a") if pd.notna(row.get("rung_a")) else row.get("rung_b")
        out["status_a"], out["status_b"] = row.get("status_a"), row.get("status_b")
        for side in ("a", "b"):
            ok = row.get(f"status_{side}") == "ok"
            out[f"median_ms_{side}"] = row.get(f"median_ms_{side}") if ok else math.nan
            out[f"share_{side}"] = row.get(f"share_of_matmul_{side}") if ok else math.nan
            out[f"matmul_tflops_{side}"] = row.get(f"matmul_tflops_{side}")
            out.update(T.measures(row, side, "step_times_ms"))
        out["presence"] = T.presence(out["status_a"], out["status_b"])
        rows.append(out)
    return T.judge(pd.DataFrame(rows), min_effect, noise)


# The ladder's rungs as timing variants, for runs without a ladder table (made before
# section 7 had jobs of its own, or with sdpa variants in timing.variants):
# (rung, precision, timing variant).
RUNGS = (
    ("fp32", "fp32", "naive"),
    ("bf16", "bf16", "naive"),
    ("bf16 + SDPA", "bf16", "sdpa"),
    ("bf16 + SDPA + compile", "bf16", "sdpa-compile"),
)


def ladder(timing_rows: pd.DataFrame) -> pd.DataFrame:
    """The training step's rungs, from the compared timing rows, where a context has more than one rung."""
    if timing_rows.empty:
        return timing_rows
    train = timing_rows[timing_rows["pass"] == "train_step"]
    parts = []
    for index, (rung, precision, variant) in enumerate(RUNGS):
        part = train[(train["precision"] == precision) & (train["variant"] == variant)]
        parts.append(part.assign(rung=rung, rung_index=index))
    rungs = pd.concat(parts, ignore_index=True)
    counts = rungs.groupby(["size", "context_length"])["rung"].transform("nunique")
    rungs = rungs[counts > 1]
    if rungs.empty:
        return rungs
    for side in ("a", "b"):
        base = rungs[rungs["rung_index"] == 0].set_index(["size", "context_length"])[f"median_ms_{side}"]
        keys = list(zip(rungs["size"], rungs["context_length"], strict=True))
        rungs[f"vs_fp32_{side}"] = base.reindex(keys).to_numpy() / rungs[f"median_ms_{side}"]
    seen = dict.fromkeys(zip(timing_rows["size"], timing_rows["context_length"], strict=True))
    first_seen = {k: i for i, k in enumerate(seen)}
    rungs["_order"] = [first_seen[k] for k in zip(rungs["size"], rungs["context_length"], strict=True)]
    rungs = rungs.sort_values(["_order", "rung_index"], kind="stable").drop(columns="_order")
    return rungs.reset_index(drop=True)


_RUNG_KEY = ("size", "context_length", "rung_key", "rung")


@finds
def _rung_ratios(rungs: pd.DataFrame) -> list[Finding]:
    """Runs without a ladder table: per rung (among the timing variants), the median ratio B/A."""
    return [
        Finding(
            _say("rung_ratios", rung=rung, counts=cells.measure_counts(part)),
            rows_behind(
                part, "median_ms_a", "median_ms_b", "ratio", "ci_low", "ci_high", "verdict", key=_RUNG_KEY
            ),
        )
        for rung, part in rungs[rungs["ratio"].notna()].groupby("rung", sort=False)
    ]


@finds
def _size_ratios(rungs: pd.DataFrame) -> list[Finding]:
    """The ladder's own table: per size, the median ratio B/A over its rungs."""
    return [
        Finding(
            _say("size_ratios", size=size, rungs=len(part), counts=cells.measure_counts(part)),
            rows_behind(
                part,
                *cells.JUDGED_COLUMNS,
                key=_RUNG_KEY,
            ),
        )
        for size, part in rungs[rungs["ratio"].notna()].groupby("size", sort=False)
    ]


@finds
def _rungs_not_compared(rungs: pd.DataFrame) -> list[Finding]:
    """The ladder's own table: the rungs not compared (the first six named)."""
    missing = rungs[~rungs["verdict"].isin(V.VERDICTS) & rungs["ratio"].isna()]
    if not len(missing):
        return []
    named = [(r["size"], r["rung_key"], r["verdict"]) for _, r in missing.head(6).iterrows()]
    return [
        Finding(
            _say("rungs_not_compared", rungs=len(missing), named=named),
            rows_behind(missing, "status_a", "status_b", "verdict", key=_RUNG_KEY),
        )
    ]


# Its comparison's findings, each with the rows of A and B behind it.
FINDINGS = (_rung_ratios, _size_ratios, _rungs_not_compared)


def _section_ladder(a, b, rows, min_effect: float, noise: V.Noise) -> Section:
    section = Section("ladder", numbered("ladder", "The optimization ladder of the training step"))
    if not (a["ladder"].empty and b["ladder"].empty):
        return _section_ladder_table(section, ladder_rows(a, b, min_effect, noise))
    # Runs without the ladder's own table: its rungs among the timing variants, if any.
    rungs = ladder(rows)
    if rungs.empty:
        return section.add(Text(_say("no_rungs")))
    section.add(Findings(_rung_ratios(rungs)))
    section.add(
        Table(
            _say("rungs_title"),
            pd.DataFrame(
                {
                    **_rung_cells(rungs),
                    "wall verdict": rungs["verdict"],
                    "A × vs fp32": rungs["vs_fp32_a"],
                    "B × vs fp32": rungs["vs_fp32_b"],
                }
            ).pipe(cells.add_measures, rungs),
            name="ladder_rungs",
        )
    )
    return section


def _rung_cells(rungs: pd.DataFrame) -> dict:
    """The columns both of the ladder's tables open with: the rung, each run's median, B/A."""
    return {
        "size": rungs["size"],
        "context": rungs["context_length"],
        "rung": rungs["rung"],
        "A median ms": cells.shown(rungs["median_ms_a"], rungs["status_a"]),
        "B median ms": cells.shown(rungs["median_ms_b"], rungs["status_b"]),
        "B/A": rungs["ratio"],
    }


def _section_ladder_table(section: Section, rungs: pd.DataFrame) -> Section:
    """The ladder section's rungs (ladder/ladder.csv) of both runs: step time B/A with its verdict, and
    each run's share of its own matmul rate (which itself differs from GPU to GPU)."""
    section.add(Findings(gather(_size_ratios(rungs), _rungs_not_compared(rungs))))
    section.add(
        Table(
            _say("rungs_title"),
            pd.DataFrame(
                {
                    **_rung_cells(rungs),
                    "interval of B/A": rungs.apply(cells.interval, axis=1),
                    "processes A/B": cells.processes(rungs),
                    "wall verdict": rungs["verdict"],
                    "A share of matmul %": rungs["share_a"] * 100,
                    "B share of matmul %": rungs["share_b"] * 100,
                }
            ).pipe(cells.add_measures, rungs),
            name="ladder_rungs",
        )
    )
    return section


def section(runs: ComparedRuns) -> Section:
    return _section_ladder(runs.a, runs.b, matched_timing(runs), runs.min_effect, runs.noise)
