"""Cells and sentences the sections' comparisons of two runs share: configurations, ratios,
intervals, verdict counts and the rule the verdicts follow."""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.analyse.compare import tables as T
from lmstudy.analyse.compare import verdict as V
from lmstudy.report.sections.labels import PASS_LABELS

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


def verdict_rule(min_effect: float) -> str:
    """The sentence that says once what the verdicts mean."""
    low, high = V.noise_band(min_effect)
    return (
        f"Verdicts come from the variation between fresh processes: the 95% interval of B/A (a "
        f"hierarchical bootstrap over processes, then steps, widened to Welch's t interval over the "
        f"processes' medians) against the band {low:.3f}–{high:.3f} (minimum effect {min_effect * 100:g}%): "
        f"same when the interval lies inside the band, faster or slower when it lies wholly outside it, "
        f"undecided when it straddles an edge; \"one process\" where a side was measured in a single "
        f"process (a run made before repetition), which cannot show the variation between processes."
    )


def counts(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts(sort=False)
    order = [v for v in V.VERDICTS if v in counts] + [v for v in counts.index if v not in V.VERDICTS]
    return ", ".join(f"{counts[v]} {v}" for v in order)


def summary_table(rows, key_labels: dict) -> pd.DataFrame:
    table = pd.DataFrame({label: rows[column] for column, label in key_labels.items()})
    table["A median ms"] = rows["median_ms_a"]
    table["B median ms"] = rows["median_ms_b"]
    table["B/A"] = rows["ratio"]
    table["95% CI of B/A"] = rows.apply(interval, axis=1)
    table["processes A/B"] = processes(rows)
    table["verdict"] = rows["verdict"]
    return table
