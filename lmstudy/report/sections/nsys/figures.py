"""Section 2, Nsight Systems: kernel tables, category shares and findings.

The functions that draw its figures (matplotlib).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse.nsys import tables as T  # noqa: E402
from lmstudy.analyse.nsys.categories import CATEGORIES  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS, size_order  # noqa: E402
from lmstudy.report.sections.nsys.tables import words  # noqa: E402

SHARES_FIGURE = "category_shares.png"


def draw_figures(data: dict[str, pd.DataFrame], out_dir: Path) -> None:
    """The kernel-time shares by category, from the loaded tables."""
    shares = T.category_shares(data["kernels"])
    fig_path = out_dir / SHARES_FIGURE
    passes = [p for p in PASS_LABELS if p in set(shares.get("pass", []))]
    if not passes:
        return  # no profile captured a kernel: no empty panel (the section says so)
    fig, axes = plots.subplots(1, len(passes), figsize=(4.4 * len(passes) + 1.8, 3.8))
    order = {s: i for i, s in enumerate(size_order(data["runs"].get("size", [])))}
    colors = plt.get_cmap("tab10").colors
    runs = data["runs"]
    for ax, pass_name in zip(axes[0], passes, strict=False):
        part = shares[shares["pass"] == pass_name].copy()
        # A configuration that ran out of memory keeps its slot, marked OOM (no kernels to share).
        failed = runs[(runs["pass"] == pass_name) & (runs["status"] != "ok")] if "status" in runs else runs
        part = pd.concat(
            [part, failed[["size", "context_length", "pass", "status"]]], ignore_index=True
        ).fillna({c: 0.0 for c in CATEGORIES if c in part})
        part["order"] = part["size"].map(order)
        part = part.sort_values(["order", "context_length"])
        labels = [f"{s}\nctx {c}" for s, c in zip(part["size"], part["context_length"], strict=False)]
        bottom = pd.Series(0.0, index=part.index)
        for color, category in zip(colors, CATEGORIES, strict=False):
            if category not in part:
                continue
            ax.bar(labels, part[category], bottom=bottom, label=category, color=color)
            bottom += part[category]
        if "status" in part:
            for label, status in zip(labels, part["status"], strict=True):
                if isinstance(status, str) and status != "ok":
                    plots.mark_missing(ax, label, 4, status)
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_ylabel(f"share of {words(data['runs'])['time']} (%)")
        ax.set_ylim(0, 100)
        ax.tick_params(axis="x", labelsize=7)
    plots.legend_outside(fig, axes, title="category")
    fig.savefig(fig_path)
    plt.close(fig)
