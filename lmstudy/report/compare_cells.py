"""Cells and sentences the sections' comparisons of two runs share: configurations, ratios,
intervals, verdict counts and the rule the verdicts follow."""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.analyse import trust
from lmstudy.analyse.compare import tables as T
from lmstudy.analyse.compare import verdict as V
from lmstudy.report.labels import PASS_LABELS

VERDICT_COLORS = {V.FASTER: "tab:green", V.SLOWER: "tab:red", V.SAME: "tab:gray", V.UNDECIDED: "tab:orange",
                  V.ONE_PROCESS: "tab:olive"}


def config_label(row) -> str:
    return f"{row['size']} ctx {int(row['context_length'])} {PASS_LABELS.get(row['pass'], row['pass'])}" + (
        f" {row['precision']}" if "precision" in row else ""
    )


def times(ratio: float) -> str:
    """A time ratio B/A in words."""
    if abs(ratio - 1) < 0.005:
        return "as fast (1.00×)"
    return f"{1 / ratio:.2f}× faster" if ratio < 1 else f"{ratio:.2f}× slower"


def _than(ratio: float) -> str:
    words = times(ratio)
    if "as fast" in words:
        return "as fast as A's (1.00×)"
    return f"{words} than A's"


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
    return pd.Series([
        f"{int(x)}/{int(y)}" if pd.notna(x) and pd.notna(y) and (x or y) else ""
        for x, y in zip(rows.get("processes_a", []), rows.get("processes_b", []), strict=True)
    ], index=rows.index, dtype=object)


def band_words(min_effect: float) -> str:
    """A band in words, e.g. "0.971–1.030 (3%)"."""
    low, high = V.noise_band(min_effect)
    return f"{low:.3f}–{high:.3f} ({min_effect * 100:g}%)"


def verdict_rule(min_effect: float, gpu_min_effect: float) -> str:
    """The sentence that says once what the verdicts mean, each measure with its own band."""
    return (
        f"Verdicts come from the variation between fresh processes: the interval of B/A against the "
        f"band of its measure, wall time's {band_words(min_effect)} (compare.min_effect) and the GPU's "
        f"busy time's {band_words(gpu_min_effect)} (compare.gpu_min_effect: GPU time agrees between "
        f"processes and runs far closer than wall time); same when the interval lies inside the band, "
        f"faster or slower when it lies wholly outside it, undecided when it straddles an edge; kernels "
        f"per step are counted exactly: equal or differs. A wall-time interval is a hierarchical bootstrap "
        f"over processes, then steps, widened to the spread between processes pooled over the section's "
        f"rows of the same regime (host-bound or not) in both runs (its {V.POOLED_CONFIDENCE:.0%} "
        f"quantile), or, where they are too few, to Welch's t interval over the row's own processes; "
        f"\"one process\" where a side was measured in a single process (a run made before repetition), "
        f"which cannot show the variation between processes. GPU time's interval comes the same way from "
        f"its per-process values, or, where a side has one value, from how closely GPU time agrees between "
        f"processes (compare.gpu_agreement)."
    )


def counts(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts(sort=False)
    known = (*V.VERDICTS, *V.KERNEL_VERDICTS)
    order = [v for v in known if v in counts] + [v for v in counts.index if v not in known]
    return ", ".join(f"{counts[v]} {v}" for v in dict.fromkeys(order))


# A ratio is stated only where its verdict decided: same, faster or slower. An undecided ratio is
# noise, and a median over noise is noise too.
DECIDED = (V.FASTER, V.SLOWER, V.SAME)
# Each measure's verdict and ratio columns (lmstudy.analyse.compare.tables.judge), as a sentence names it.
MEASURES = (("wall time", "verdict", "ratio"), ("GPU time", "gpu_verdict", "gpu_ratio"),
            ("kernels per step", "kernels_verdict", None))


def has_gpu(rows: pd.DataFrame) -> bool:
    """Whether either run measured the GPU's time of any of `rows` (a CPU run did not)."""
    return "gpu_verdict" in rows and bool((rows["gpu_verdict"] != V.TOO_FEW).any())


def decided_ratio(part: pd.DataFrame, verdict: str = "verdict", ratio: str = "ratio") -> str:
    """The median ratio over the rows whose verdict decided, or that none is stated."""
    decided = part[part[verdict].isin(DECIDED)]
    if not len(decided):
        return "no ratio stated"
    return f"median B/A {decided[ratio].median():.3f} over the {len(decided)} decided"


def measure_counts(part: pd.DataFrame) -> str:
    """Each measured measure's verdict counts with its decided rows' median ratio, e.g. "wall time 2
    slower, 7 undecided (median B/A 1.830 over the 2 decided); GPU time 9 slower (...)"."""
    said = []
    for name, verdict, ratio in MEASURES:
        if verdict in part and (part[verdict] != V.TOO_FEW).any():
            said.append(f"{name} {counts(part[verdict])}"
                        + (f" ({decided_ratio(part, verdict, ratio)})" if ratio else ""))
    return "; ".join(said)


def flags(rows: pd.DataFrame) -> pd.Series:
    """Each side's marks (lmstudy.analyse.trust: † host-bound, ‡ noisy) as "A/B", e.g. "†/†‡"."""
    def marks(row, side):
        return trust.marks({flag: row.get(f"{flag}_{side}", False) for flag in trust.FLAG_MARKS})

    return pd.Series([f"{marks(r, 'a')}/{marks(r, 'b')}" if marks(r, "a") or marks(r, "b") else ""
                      for _, r in rows.iterrows()], index=rows.index, dtype=object)


def gpu_interval(row) -> object:
    if pd.isna(row["gpu_ci_low"]):
        return math.nan
    return f"{row['gpu_ci_low']:.3f}–{row['gpu_ci_high']:.3f}"


def kernel_counts(rows: pd.DataFrame) -> pd.Series:
    return pd.Series([f"{int(a)}/{int(b)}" if pd.notna(a) and pd.notna(b) else ""
                      for a, b in zip(rows["kernels_a"], rows["kernels_b"], strict=True)],
                     index=rows.index, dtype=object)


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
