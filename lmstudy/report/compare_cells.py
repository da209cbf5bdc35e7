"""Cells and sentences the sections' comparisons of two runs share: configurations, ratios,
intervals, verdict counts and the rule the verdicts follow. The numbers and the cases are chosen here,
the wording is in compare.j2 beside it."""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.analyse import trust
from lmstudy.analyse.compare import tables as T
from lmstudy.analyse.compare import verdict as V
from lmstudy.report.contract import words
from lmstudy.report.labels import PASS_LABELS

VERDICT_COLORS = {
    V.FASTER: "tab:green",
    V.SLOWER: "tab:red",
    V.SAME: "tab:gray",
    V.UNDECIDED: "tab:orange",
    V.ONE_PROCESS: "tab:olive",
}


def _say(macro: str, **values) -> str:
    return words("report", "compare.j2", macro, **values)


def config_label(row) -> str:
    return _say(
        "config_label",
        size=row["size"],
        context=int(row["context_length"]),
        step=PASS_LABELS.get(row["pass"], row["pass"]),
        has_precision="precision" in row,
        precision=row.get("precision"),
    )


def times(ratio: float) -> str:
    """A time ratio B/A in words."""
    return _say("times", same=abs(ratio - 1) < 0.005, faster=ratio < 1, by=1 / ratio if ratio < 1 else ratio)


# A judged row's columns behind a finding that states its ratio: each side's median, wall time's ratio,
# interval and verdict, GPU time's ratio and verdict, the kernels' verdict.
JUDGED_COLUMNS = ("median_ms_a", "median_ms_b", "ratio", "ci_low", "ci_high", "verdict", "gpu_ratio",
                  "gpu_verdict", "kernels_verdict")


def interval(row) -> object:
    if pd.isna(row["ci_low"]):
        return math.nan
    return f"{row['ci_low']:.3f}–{row['ci_high']:.3f}"


def shown(values: pd.Series, status: pd.Series) -> pd.Series:
    """A number where the side measured it, else its status (OOM, not measured)."""
    shown = values.astype(object)
    status = status.astype(object).where(status.notna(), T.MISSING_STATUS)
    return shown.where(status == "ok", status)


def processes(rows: pd.DataFrame) -> pd.Series:
    """How many fresh processes measured each side, as "2/3"."""
    return pd.Series(
        [
            f"{int(x)}/{int(y)}" if pd.notna(x) and pd.notna(y) and (x or y) else ""
            for x, y in zip(rows.get("processes_a", []), rows.get("processes_b", []), strict=True)
        ],
        index=rows.index,
        dtype=object,
    )


def band_words(min_effect: float) -> str:
    """A band in words, e.g. "0.971–1.030 (3%)"."""
    low, high = V.noise_band(min_effect)
    return _say("band", low=low, high=high, percent=min_effect * 100)


def verdict_rule(min_effect: float, gpu_min_effect: float) -> str:
    """The sentence that says once what the verdicts mean, each measure with its own band."""
    return _say(
        "verdict_rule",
        wall=band_words(min_effect),
        gpu=band_words(gpu_min_effect),
        pooled=V.POOLED_CONFIDENCE,
    )


def compiled_rule(agreement: float) -> str:
    """The sentence that says how a row measured under torch.compile is judged (one compilation a run)."""
    return _say("compiled_rule", agreement=agreement)


def counts(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts(sort=False)
    known = (*V.VERDICTS, *V.KERNEL_VERDICTS)
    order = [v for v in known if v in counts] + [v for v in counts.index if v not in known]
    return _say("counts", counted=[(counts[v], v) for v in dict.fromkeys(order)])


# A ratio is stated only where its verdict decided: same, faster or slower. An undecided ratio is
# noise, and a median over noise is noise too.
DECIDED = (V.FASTER, V.SLOWER, V.SAME)
# Each measure's verdict and ratio columns (lmstudy.analyse.compare.tables.judge), by the key compare.j2
# names it by.
MEASURES = (
    ("wall", "verdict", "ratio"),
    ("gpu", "gpu_verdict", "gpu_ratio"),
    ("kernels", "kernels_verdict", None),
)


def has_gpu(rows: pd.DataFrame) -> bool:
    """Whether either run measured the GPU's time of any of `rows` (a CPU run did not)."""
    return "gpu_verdict" in rows and bool((rows["gpu_verdict"] != V.TOO_FEW).any())


def decided_ratio(part: pd.DataFrame, verdict: str = "verdict", ratio: str = "ratio") -> str:
    """The median ratio over the rows whose verdict decided, or that none is stated."""
    decided = part[part[verdict].isin(DECIDED)]
    median = decided[ratio].median() if len(decided) else None
    return _say("decided_ratio", decided=len(decided), median=median)


def measure_counts(part: pd.DataFrame) -> str:
    """Each measured measure's verdict counts with its decided rows' median ratio, e.g. "wall time 2
    slower, 7 undecided (median B/A 1.830 over the 2 decided); GPU time 9 slower (...)"."""
    said = []
    for name, verdict, ratio in MEASURES:
        if verdict in part and (part[verdict] != V.TOO_FEW).any():
            said.append((name, counts(part[verdict]), decided_ratio(part, verdict, ratio) if ratio else None))
    return _say("measure_counts", said=said)


def flags(rows: pd.DataFrame) -> pd.Series:
    """Each side's marks (lmstudy.analyse.trust: † host-bound, ‡ noisy) as "A/B", e.g. "†/†‡"."""

    def marks(row, side):
        return trust.marks({flag: row.get(f"{flag}_{side}", False) for flag in trust.FLAG_MARKS})

    return pd.Series(
        [
            f"{marks(r, 'a')}/{marks(r, 'b')}" if marks(r, "a") or marks(r, "b") else ""
            for _, r in rows.iterrows()
        ],
        index=rows.index,
        dtype=object,
    )


def gpu_interval(row) -> object:
    if pd.isna(row["gpu_ci_low"]):
        return math.nan
    return f"{row['gpu_ci_low']:.3f}–{row['gpu_ci_high']:.3f}"


def kernel_counts(rows: pd.DataFrame) -> pd.Series:
    return pd.Series(
        [
            f"{int(a)}/{int(b)}" if pd.notna(a) and pd.notna(b) else ""
            for a, b in zip(rows["kernels_a"], rows["kernels_b"], strict=True)
        ],
        index=rows.index,
        dtype=object,
    )


def add_measures(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The columns every comparison table carries after its wall time: the sides' flags, the GPU's
    time and kernels per step with their verdicts (where either run measured them), and the reading."""
    table["flags A/B"] = flags(rows)
    if has_gpu(rows):
        table["A GPU ms"] = rows["gpu_ms_a"]
        table["B GPU ms"] = rows["gpu_ms_b"]
        table["GPU B/A"] = rows["gpu_ratio"]
        table["interval of GPU B/A"] = rows.apply(gpu_interval, axis=1)
        table["GPU verdict"] = rows["gpu_verdict"]
    if "kernels_verdict" in rows and (rows["kernels_verdict"] != V.TOO_FEW).any():
        table["kernels per step A/B"] = kernel_counts(rows)
        table["kernels"] = rows["kernels_verdict"]
    table["reading"] = rows["reading"]
    return table


def summary_table(rows, key_labels: dict) -> pd.DataFrame:
    table = pd.DataFrame({label: rows[column] for column, label in key_labels.items()})
    table["A median ms"] = rows["median_ms_a"]
    table["B median ms"] = rows["median_ms_b"]
    table["B/A"] = rows["ratio"]
    table["interval of B/A"] = rows.apply(interval, axis=1)
    table["processes A/B"] = processes(rows)
    table["wall verdict"] = rows["verdict"]
    return add_measures(table, rows)
