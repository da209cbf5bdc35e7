"""Section 6, the whole model under torch.compile: the functions that draw its figures (matplotlib)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS  # noqa: E402


def draw_figures(comp: pd.DataFrame, out_dir: Path) -> None:
    """The speed-up of torch.compile per pass and size, from the comparison table."""
    passes = [p for p in PASS_LABELS if p in set(comp["pass"])]
    fig, axes = plots.subplots(1, len(passes), figsize=(3.8 * len(passes) + 1.6, 3.4))
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = comp[comp["pass"] == pass_name]
        groups = list(part.groupby(["precision", "attention"]))
        sizes = [s for s in part["size"].cat.categories if s in set(part["size"])]
        width = 0.8 / max(len(groups), 1)
        plots.reference_line(ax, label="eager (1.0×)")
        missing = []
        for i, ((precision, attention), g) in enumerate(groups):
            g = g.set_index("size").reindex(sizes)
            x = [j + i * width for j in range(len(sizes))]
            bars = ax.bar(x, g["speedup"].fillna(0), width, label=f"{precision} {attention}")
            for xi, speedup, eager, compiled in zip(
                x, g["speedup"], g["eager_status"], g["compiled_status"], strict=True
            ):
                if speedup != speedup:
                    status = next((s for s in (compiled, eager) if s == s and s != "ok"), "not measured")
                    missing.append((xi, status, bars[0].get_facecolor()))
        ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(sizes))], sizes)
        low, high = ax.get_ylim()
        for xi, status, color in missing:
            plots.mark_missing(ax, xi, low + 0.04 * (high - low), status, color)
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_ylabel("eager / compiled time (×)")
    plots.legend_outside(fig, axes)
    fig.savefig(out_dir / "speedup.png")
    plt.close(fig)
