"""Section 5 in the comparison of two runs: attention's forward and backward times."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.compare import tables as T
from lmstudy.analyse.compare import verdict as V
from lmstudy.analyse.compare.runs import Run
from lmstudy.registry import numbered, reference
from lmstudy.report import compare_cells as cells
from lmstudy.report.contract import ComparedRuns, wording
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.report.render import Findings, Section, Table, Text

ATTENTION_KEY = ["implementation", "precision", "head_dim", "seq_len"]


_say = wording(__name__)


def attention(a: Run, b: Run, min_effect: float, noise: V.Noise | None = None) -> pd.DataFrame:
    """Section 5: forward and backward medians per implementation, precision, d and length, with a
    verdict per measure (a part's GPU columns are named after it: forward_gpu_busy_ms, ...)."""
    parts = [(d, f"{d}_median_ms", f"{d}_times_ms", f"{d}_") for d in ("forward", "backward")]
    gpu = [f"{prefix}{c}" for *_, prefix in parts for c in T.GPU_COLUMNS]
    joined = T.join_table(
        a,
        b,
        "attention",
        ATTENTION_KEY,
        [c for _, median, samples, _ in parts for c in (median, samples)] + gpu,
    )
    if joined.empty:
        return joined
    return T.sample_comparisons(joined, ATTENTION_KEY, parts, min_effect, noise)


def attention_speedups(a: Run, b: Run) -> pd.DataFrame:
    """Each run's speed-up of SDPA and of compiled naive attention over naive eager (forward+backward)."""
    out = None
    for name, run in (("a", a), ("b", b)):
        frame = run["attention"]
        if frame.empty:
            continue
        ok = frame[frame["status"] == "ok"].assign(
            total=lambda f: f["forward_median_ms"] + f["backward_median_ms"]
        )
        wide = ok.pivot_table(
            index=["precision", "head_dim", "seq_len"],
            columns="implementation",
            values="total",
            aggfunc="first",
        )
        part = pd.DataFrame(index=wide.index)
        for other in ("sdpa", "naive-compile"):
            if "naive" in wide and other in wide:
                part[f"{other}_{name}"] = wide["naive"] / wide[other]
        out = part if out is None else out.join(part, how="outer")
    if out is None or out.empty or not len(out.columns):
        return pd.DataFrame()
    return out.reset_index()


_ROWS_KEY = (*ATTENTION_KEY, "part")


@finds
def _part_ratios(rows: pd.DataFrame) -> list[Finding]:
    """Per part (forward, backward): the median ratio B/A over the rows compared, with their verdicts."""
    compared = rows[rows["verdict"].isin(V.VERDICTS) & rows["ratio"].notna()]
    return [
        Finding(
            _say(
                "part_ratios", part=part_name, configurations=len(part), measures=cells.measure_counts(part)
            ),
            rows_behind(
                part,
                *cells.JUDGED_COLUMNS,
                key=_ROWS_KEY,
            ),
        )
        for part_name, part in compared.groupby("part", sort=False)
    ]


@finds
def _not_compared(rows: pd.DataFrame) -> list[Finding]:
    """The rows not compared (in one run only, out of memory in one), counted by why."""
    unmatched = rows[~rows["verdict"].isin(V.VERDICTS)]
    if not len(unmatched):
        return []
    return [
        Finding(
            _say("not_compared", why=cells.counts(unmatched["verdict"])),
            rows_behind(unmatched, "median_ms_a", "median_ms_b", "verdict", key=_ROWS_KEY),
        )
    ]


# Its comparison's findings, each with the rows of A and B behind it.
FINDINGS = (_part_ratios, _not_compared)


def _section_attention(a, b, min_effect: float, noise: V.Noise) -> Section:
    section = Section("attention", numbered("attention", "Attention"))
    rows = attention(a, b, min_effect, noise)
    if rows.empty:
        return section.add(Text(_say("neither", where=reference("attention"))))
    section.add(Text(_say("opening")))
    section.add(Findings(gather(_part_ratios(rows), _not_compared(rows))))
    section.add(
        Table(
            _say("step_times_title"),
            cells.summary_table(
                rows,
                {
                    "implementation": "implementation",
                    "precision": "precision",
                    "head_dim": "d",
                    "seq_len": "seq",
                    "part": "part",
                },
            ),
            name="attention_step_times",
        )
    )
    speedups = attention_speedups(a, b)
    if not speedups.empty:
        speedups = speedups.rename(
            columns={
                "head_dim": "d",
                "seq_len": "seq",
                "sdpa_a": "A SDPA ×",
                "sdpa_b": "B SDPA ×",
                "naive-compile_a": "A compiled ×",
                "naive-compile_b": "B compiled ×",
            }
        )
        section.add(Table(_say("speedups_title"), speedups, name="attention_speedups"))
    return section


def section(runs: ComparedRuns) -> Section:
    return _section_attention(runs.a, runs.b, runs.min_effect, runs.noise)
