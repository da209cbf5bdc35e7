"""Section 5, attention alone: tables, figures, memory accounting and findings.

The functions that draw its figures (matplotlib).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.attention.tables import LABELS, MIB, ratio_frame  # noqa: E402


def _plot(frame: pd.DataFrame, y: str, ylabel: str, out: Path, scale: float = 1.0) -> None:
    dims = sorted(frame["head_dim"].unique())
    fig, axes = plots.subplots(1, len(dims), figsize=(3.4 * len(dims) + 2.0, 3.4), sharey=True)
    markers = {"naive": "o", "naive-compile": "s", "sdpa": "^"}
    for ax, d in zip(axes[0], dims, strict=True):
        if not plots.has_values(frame[frame["head_dim"] == d][y]):
            # Every configuration of this head size ran out of memory: say so, no empty axes.
            ax.text(0.5, 0.5, "out of memory\nat every length", ha="center", va="center",
                    transform=ax.transAxes, color="0.3")
            ax.set_title(f"d = {int(d)}")
            ax.set_xticks([])
            continue
        part = frame[frame["head_dim"] == d]
        for (impl, precision), line in part.groupby(["implementation", "precision"], observed=True):
            line = line.sort_values("seq_len")
            good = line[line["status"] == "ok"]
            style = "-" if precision == "fp32" else "--"
            drawn = ax.plot(
                good["seq_len"],
                good[y] / scale,
                style,
                marker=markers[impl],
                label=f"{LABELS[impl]} {precision}",
            )
            bad = line[line["status"] != "ok"]
            if len(bad):
                color = drawn[0].get_color()
                top = frame[y].max() / scale * 1.6 if frame[y].notna().any() else 1.0
                for seq, status in zip(bad["seq_len"], bad["status"], strict=True):
                    plots.mark_missing(ax, seq, top, status, color)
        plots.power_of_two_ticks(ax, part["seq_len"])
        plots.plain_log(ax, "y")
        ax.set_title(f"d = {int(d)}")
        ax.set_xlabel("sequence length")
    axes[0][0].set_ylabel(ylabel)
    plots.legend_outside(fig, axes)
    fig.savefig(out)
    plt.close(fig)


def draw_figures(frame: pd.DataFrame, out_dir: Path) -> None:
    """Step time, memory before backward and the compile speed-up, from the loaded table."""
    _plot(frame, "total_ms", "forward + backward median (ms)", out_dir / "time.png")
    if frame.get("memory_before_backward_bytes", pd.Series(dtype=float)).notna().any():
        _plot(
            frame,
            "memory_before_backward_bytes",
            "in use before backward (MiB)",
            out_dir / "memory.png",
            scale=MIB,
        )
    ratios = ratio_frame(frame, "naive", "naive-compile")
    if not ratios.empty:
        fig, axes = plots.subplots(figsize=(6.2, 3.4))
        ax = axes[0][0]
        for (precision, d), line in ratios.groupby(["precision", "head_dim"]):
            line = line.sort_values("seq_len")
            ax.plot(
                line["seq_len"],
                line["total"],
                "-" if precision == "fp32" else "--",
                marker="o",
                label=f"d={int(d)} {precision}",
            )
        plots.reference_line(ax, label="eager (1.0×)")
        plots.power_of_two_ticks(ax, ratios["seq_len"])
        ax.set_xlabel("sequence length")
        ax.set_ylabel("naive eager / compiled time (×)")
        plots.legend_outside(fig, axes)
        fig.savefig(out_dir / "compile_speedup.png")
        plt.close(fig)
