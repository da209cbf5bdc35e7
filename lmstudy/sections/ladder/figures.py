"""Section 7, the optimization ladder of the training step.

The functions that draw its figures (matplotlib).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy import rates  # noqa: E402
from lmstudy.report.labels import on_cpu, size_order  # noqa: E402
from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.ladder.tables import CATEGORY_COLUMNS, time_words  # noqa: E402


def _rung_order(ladder: pd.DataFrame) -> list[str]:
    return list(ladder.sort_values("rung_index", kind="stable")["rung"].drop_duplicates())


def _gpu_share(rows: pd.DataFrame) -> pd.Series:
    """Each row's achieved TFLOP/s over its GPU busy time, as a share of its measured matmul ceiling
    (NaN where a column is missing: a CPU run, an older run)."""
    needed = ("flops_per_step", "gpu_busy_ms", "matmul_tflops")
    if not set(needed) <= set(rows.columns):
        return pd.Series(float("nan"), index=rows.index)
    flops, busy, ceiling = (pd.to_numeric(rows[c], errors="coerce") for c in needed)
    return rates.share_of_peak(rates.achieved_tflops(flops, ms=busy), ceiling)


def _share_figure(ladder: pd.DataFrame, path: Path) -> None:
    sizes = size_order(ladder["size"].astype(str))
    rungs = _rung_order(ladder)
    # The legend goes below the plot in columns: beside it, long rung names squeezed the plot to a strip.
    fig, axes = plots.subplots(
        1, 1, figsize=(max(6.0, 0.9 * len(rungs) * len(sizes) + 3), 4.2 + 0.3 * len(rungs)))
    ax = axes[0][0]
    width = 0.8 / len(rungs)
    missing = []
    hatched = False
    for i, rung in enumerate(rungs):
        g = ladder[ladder["rung"] == rung].assign(size=lambda f: f["size"].astype(str)).set_index("size")
        g = g.reindex(sizes)
        x = [j + i * width for j in range(len(sizes))]
        values = g["share_of_matmul"] * 100
        bars = ax.bar(x, values.fillna(0), width, label=textwrap.fill(rung, 32))
        # A host-bound rung (†) hatched: its share is the host's pace more than the GPU's.
        for bar, bound in zip(bars, g.get("host_bound", pd.Series(False, index=g.index)).fillna(False),
                              strict=True):
            if bool(bound):
                bar.set_hatch("//")
                hatched = True
        # The same share over the GPU's busy time: where the host paces the step (†), the GPU's own
        # rate, on which the findings rank those rungs.
        on_gpu = 100 * _gpu_share(g)
        if on_gpu.notna().any():
            ax.scatter(x, on_gpu, marker="D", s=22, color="black", zorder=3,
                       label="on the GPU (busy time)" if i == 0 else None)
        for xi, value, status in zip(x, values, g["status"], strict=True):
            if value != value:
                shown = "not measured" if status != status else str(status)
                missing.append((xi, shown, bars[0].get_facecolor()))
    ax.set_xticks([j + width * (len(rungs) - 1) / 2 for j in range(len(sizes))], sizes)
    ax.set_ylabel("share of the measured bf16 matmul ceiling (%)")
    low, high = ax.get_ylim()
    for xi, status, color in missing:
        plots.mark_missing(ax, xi, low + 0.04 * (high - low), status, color)
    if hatched:
        ax.bar([0], [0], 0, color="white", edgecolor="0.3", hatch="//", label="host-bound (†)")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(rungs), 2), fontsize="small",
               title="rung", title_fontsize="small")
    device = "CPU" if on_cpu(ladder) else "GPU"
    over = "; bars over wall time, diamonds over GPU busy time" if device == "GPU" else ""
    ax.set_title(textwrap.fill(f"Training step: achieved TFLOP/s as a share of the {device}'s sustained "
                               f"matmul ceiling{over}", 60), fontsize="medium")
    fig.savefig(path)
    plt.close(fig)


def _time_figure(ladder: pd.DataFrame, breakdown: pd.DataFrame, path: Path) -> None:
    sizes = [s for s in size_order(ladder["size"].astype(str)) if s in set(breakdown["size"].astype(str))]
    rungs = _rung_order(ladder)
    words = time_words(ladder)
    colors = plt.get_cmap("tab10").colors
    fig, axes = plots.subplots(
        1, len(sizes), figsize=(max(4.0, 1.05 * len(rungs) + 1.2) * len(sizes) + 1.8, 4.4)
    )
    for ax, size in zip(axes[0], sizes, strict=True):
        part = ladder[ladder["size"].astype(str) == size].set_index("rung").reindex(rungs)
        profiled = breakdown[breakdown["size"].astype(str) == size].set_index("rung").reindex(rungs)
        x = list(range(len(rungs)))
        bottom = pd.Series(0.0, index=profiled.index)
        for color, (column, category) in zip(colors, CATEGORY_COLUMNS.items(), strict=False):
            values = profiled[column].fillna(0.0)
            if (values > 0).any():
                ax.bar(x, values, bottom=bottom, label=category, color=color)
                bottom += values
        ax.scatter(x, profiled["median_ms"], marker="_", s=200, color="black", zorder=5,
                   label="step (median)")
        low, high = ax.get_ylim()
        for xi, status, busy in zip(x, part["status"], profiled["gpu_busy_ms"], strict=True):
            if busy != busy:
                shown = status if isinstance(status, str) and status != "ok" else "not profiled"
                plots.mark_missing(ax, xi, low + 0.04 * (high - low), shown)
        # The rungs by the names the tables use, wrapped to stay readable under a narrow bar.
        ax.set_xticks(x, [textwrap.fill(str(rung), 14) for rung in rungs], fontsize="x-small")
        ax.set_title(size)
        ax.set_ylabel(f"{words} per step (ms)")
    plots.legend_outside(fig, axes, title="category")
    fig.savefig(path)
    plt.close(fig)
