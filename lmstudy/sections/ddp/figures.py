"""The data-parallel section's figure (matplotlib): each version's step, split into the step without
communication and the communication it exposes."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.ddp.tables import step_table  # noqa: E402


def draw_figures(frame: pd.DataFrame, out_dir: Path) -> None:
    """step_time.png: a panel per size and number of processes, a bar per version: the step without
    communication (none's median) and, above it, the time the version adds (its median beyond none's;
    nothing where it is quicker), with the 95% interval of its own median (cut at the axis's top, its
    value written, where it reaches past it)."""
    table = step_table(frame)
    groups = list(table.groupby(["size", "world_size"], sort=False))
    fig, axes = plots.subplots(1, len(groups), figsize=(4.8 * len(groups) + 2.4, 4), sharey=False)
    for ax, ((size, world), rows) in zip(axes[0], groups, strict=True):
        rows = rows.reset_index(drop=True)
        base = rows["no_comm_ms"].fillna(rows["step_ms"]).clip(upper=rows["step_ms"])
        ax.bar(rows.index, base, color="tab:blue", label="step without communication (none)")
        ax.bar(rows.index, rows["step_ms"] - base, bottom=base, color="tab:orange",
               label="communication exposed (beyond none)")
        ax.errorbar(rows.index, rows["step_ms"],
                    yerr=[rows["step_ms"] - rows["ci_low_ms"], rows["ci_high_ms"] - rows["step_ms"]],
                    fmt="none", ecolor="black", capsize=3, label="95% interval of the median")
        # An interval of two ranks (Student's t, 1 degree of freedom) can reach far past the bars: the
        # axis stops above the tallest bar, and an interval cut there has its top written.
        top = 1.6 * rows["step_ms"].max()
        ax.set_ylim(0, top)
        for i, high in rows["ci_high_ms"].items():
            if high > top:
                ax.annotate(f"↑ {high:,.0f}", (i, top), xytext=(0, -12), textcoords="offset points",
                            ha="center", fontsize="x-small")
        ax.set_xticks(rows.index, rows["version_label"], rotation=45, ha="right")
        ax.set_title(f"{size}, {int(world)} processes")
        ax.set_ylabel("step time (ms)")
    plots.legend_outside(fig, axes)
    fig.savefig(out_dir / "step_time.png")
    plt.close(fig)
