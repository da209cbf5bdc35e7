"""Section 7, the optimization ladder of the training step.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.sections.labels import faster
from lmstudy.report.sections.ladder.tables import (
    CATEGORY_COLUMNS,
    best_rungs,
    breakdown_frame,
    on_cpu,
    time_words,
)


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%"


def findings(ladder: pd.DataFrame) -> list[str]:
    """Sentences computed from the ladder: best rung and its share, biggest step, where the best rung's
    time goes, and which rungs could not run and why."""
    items = []
    words = time_words(ladder)
    breakdown = breakdown_frame(ladder)
    for _, best in best_rungs(ladder).iterrows():
        text = (
            f"{best['size']}: the best rung is {best['rung']}, {best['median_ms']:.2f} ms per step, "
            f"{best['achieved_tflops']:.3g} TFLOP/s"
        )
        if pd.notna(best["share_of_matmul"]):
            reference = best["achieved_tflops"] / best["share_of_matmul"]
            text += (
                f" = {best['share_of_matmul'] * 100:.1f}% of the dense bf16 matmul rate measured in this run "
                f"({reference:.3g} TFLOP/s)"
            )
        if pd.notna(best["speedup_vs_fp32"]) and best["rung_key"] != "fp32":
            text += f"; {faster(best['speedup_vs_fp32'])} than fp32"
        items.append(text + ".")
    steps = ladder.dropna(subset=["speedup_vs_previous"])
    for size, part in steps.groupby("size", sort=False, observed=True):
        top = part.loc[part["speedup_vs_previous"].idxmax()]
        if top["speedup_vs_previous"] > 1:
            items.append(
                f"{size}: the biggest step is {top['rung']} over {top['previous_rung']}, "
                f"{faster(top['speedup_vs_previous'])}."
            )
        else:
            items.append(f"{size}: no rung is faster than the one below it.")
    for _, best in best_rungs(ladder).iterrows():
        row = breakdown[(breakdown["size"] == best["size"]) & (breakdown["rung_key"] == best["rung_key"])]
        if row.empty or not row["gpu_busy_ms"].iloc[0] > 0:
            continue
        row = row.iloc[0]
        parts = sorted(
            ((category, row[column]) for column, category in CATEGORY_COLUMNS.items() if row[column] > 0),
            key=lambda kv: -kv[1],
        )[:3]
        text = (
            f"{best['size']}, {best['rung']}: of its {row['gpu_busy_ms']:.2f} ms of {words} per step, "
            + ", ".join(f"{category} {_pct(ms, row['gpu_busy_ms'])}" for category, ms in parts)
        )
        if row["not_busy_ms"] > 0:
            where = "is outside those operators" if on_cpu(ladder) else "the GPU waited for the host"
            text += f"; {row['not_busy_ms']:.2f} ms of the {row['median_ms']:.2f} ms step {where}"
        items.append(text + ".")
    unsupported = ladder[ladder["status"] == "unsupported"]
    for _, part in unsupported.groupby("rung_key", sort=False):
        sizes = ", ".join(dict.fromkeys(part["size"].astype(str)))
        reason = str(part["reason"].iloc[0])
        items.append(f"Could not run here: {part['rung'].iloc[0]} ({sizes}): {reason}")
    oom = ladder[ladder["status"] == "OOM"]
    if len(oom):
        names = ", ".join(f"{r['size']} {r['rung']}" for _, r in oom.iterrows())
        items.append(f"Out of memory: {names}.")
    return items
