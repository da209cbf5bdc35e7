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
from lmstudy.report.labels import PASS_LABELS, size_order  # noqa: E402
from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.nsys.tables import words  # noqa: E402

SHARES_FIGURE = "category_shares.png"


def draw_figures(data: dict[str, pd.DataFrame], out_dir: Path) -> None:
    """The kernel-time shares by category, from the loaded tables.

    One horizontal bar per configuration (readable labels however many there are), showing the
    categories other than GEMM: on a 0-100% axis GEMM's 80% would flatten them, so its share is
    written at the end of each bar instead.
    """
    shares = T.category_shares(data["kernels"])
    fig_path = out_dir / SHARES_FIGURE
    passes = [p for p in PASS_LABELS if p in set(shares.get("pass", []))]
    if not passes:
        return  # no profile captured a kernel: no empty panel (the section says so)
    runs = data["runs"]
    order = {s: i for i, s in enumerate(size_order(runs.get("size", [])))}
    rows = max(len(shares[shares["pass"] == p]) for p in passes)
    fig, axes = plots.subplots(
        1, len(passes), figsize=(4.6 * len(passes) + 2.0, 1.2 + 0.32 * max(rows, 2)), sharey=False
    )
    colors = dict(zip(CATEGORIES, plt.get_cmap("tab10").colors, strict=False))
    others = [c for c in CATEGORIES if c != "GEMM"]
    time_word = words(runs)["time"]
    for ax, pass_name in zip(axes[0], passes, strict=False):
        part = shares[shares["pass"] == pass_name].copy()
        # A configuration that ran out of memory keeps its slot, marked OOM (no kernels to share).
        failed = runs[(runs["pass"] == pass_name) & (runs["status"] != "ok")] if "status" in runs else runs
        part = pd.concat(
            [part, failed[["size", "context_length", "pass", "status"]]], ignore_index=True
        ).fillna({c: 0.0 for c in CATEGORIES if c in part})
        part["order"] = part["size"].map(order)
        # Largest size at the bottom, as the tables list them top-down.
        part = part.sort_values(["order", "context_length"], ascending=False).reset_index(drop=True)
        labels = [f"{s} ctx {c}" for s, c in zip(part["size"], part["context_length"], strict=False)]
        y = list(range(len(part)))
        left = pd.Series(0.0, index=part.index)
        for category in others:
            if category not in part or not (part[category] > 0).any():
                continue
            ax.barh(y, part[category], left=left, label=category, color=colors[category], height=0.7)
            left += part[category]
        for yi, total, gemm, status in zip(
            y, left, part.get("GEMM", pd.Series(0.0, index=part.index)), part.get("status"), strict=False
        ):
            if isinstance(status, str) and status != "ok":
                ax.annotate(status, (0, yi), xytext=(3, 0), textcoords="offset points", va="center",
                            fontsize="x-small", color="0.3")
            else:
                ax.annotate(f"GEMM {gemm:.0f}%", (total, yi), xytext=(3, 0), textcoords="offset points",
                            va="center", fontsize="x-small")
        ax.set_yticks(y, labels, fontsize="x-small")
        ax.set_xlim(0, max(float(left.max()), 1.0) * 1.35)
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_xlabel(f"share of {time_word} (%), GEMM left out")
    plots.legend_outside(fig, axes, title="category")
    fig.savefig(fig_path)
    plt.close(fig)
