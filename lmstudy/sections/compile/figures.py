"""Section 6, the whole model under torch.compile: the functions that draw its figures (matplotlib)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.report.labels import PASS_LABELS  # noqa: E402
from lmstudy.sections import plots  # noqa: E402


def draw_figures(comp: pd.DataFrame, out_dir: Path) -> None:
    """The speed-up of torch.compile per pass and size, from the comparison table."""
    passes = [p for p in PASS_LABELS if p in set(comp["pass"])]
    fig, axes = plots.subplots(1, len(passes), figsize=(3.8 * len(passes) + 1.6, 3.4))
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = comp[comp["pass"] == pass_name]
        groups = list(part.groupby(["precision", "attention"]))
        sizes = [s for s in part["size"].cat.categories if s in set(part["size"])]
        width = 0.8 / max(len(groups), 1)
        values_seen: list[float] = []
        plots.reference_line(ax, label="eager (1.0×)")
        missing = []
        for i, ((precision, attention), g) in enumerate(groups):
            g = g.set_index("size").reindex(sizes)
            x = [j + i * width for j in range(len(sizes))]
            # Bars grow from 1.0× (no change), up for faster and down for slower: from 0 a 5 to 20%
            # effect would be a sliver on top of a tall bar.
            bars = ax.bar(
                x, (g["speedup"] - 1).fillna(0), width, bottom=1.0, label=f"{precision} {attention}"
            )
            # The speed-up's interval from the two modes' intervals (far ends): a bar is one
            # job's processes, and the error bar says how far they allow it to move.
            low = g["eager_ci_low_ms"] / g["compiled_ci_high_ms"]
            high = g["eager_ci_high_ms"] / g["compiled_ci_low_ms"]
            known = low.notna() & high.notna() & g["speedup"].notna()
            if known.any():
                ax.errorbar([xi for xi, k in zip(x, known, strict=True) if k], g["speedup"][known],
                            yerr=[(g["speedup"] - low)[known], (high - g["speedup"])[known]],
                            fmt="none", ecolor="0.2", capsize=3, linewidth=0.8)
                values_seen.extend([*low[known], *high[known]])
            for xi, speedup in zip(x, g["speedup"], strict=True):
                if speedup == speedup:
                    ax.annotate(f"{speedup:.2f}×", (xi, speedup), textcoords="offset points",
                                xytext=(0, 3 if speedup >= 1 else -10), ha="center", fontsize="x-small")
            for xi, speedup, eager, compiled in zip(
                x, g["speedup"], g["eager_status"], g["compiled_status"], strict=True
            ):
                if speedup != speedup:
                    status = next((s for s in (compiled, eager) if s == s and s != "ok"), "not measured")
                    missing.append((xi, status, bars[0].get_facecolor()))
        ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(sizes))], sizes)
        values = pd.concat([part["speedup"].dropna(), pd.Series(values_seen, dtype=float)])
        if len(values):
            span = max(values.max(), 1.0) - min(values.min(), 1.0)
            margin = 0.25 * span + 0.02
            ax.set_ylim(min(values.min(), 1.0) - margin, max(values.max(), 1.0) + margin)
        low, high = ax.get_ylim()
        for xi, status, color in missing:
            plots.mark_missing(ax, xi, low + 0.04 * (high - low), status, color)
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_ylabel("eager / compiled time (×)")
    # One series needs no legend beside the reference line: the title says what it is.
    series = comp[["precision", "attention"]].drop_duplicates()
    if len(series) > 1:
        plots.legend_outside(fig, axes)
    else:
        only = series.iloc[0]
        fig.suptitle(
            f"{only['precision']}, {only['attention']} attention; dotted: eager (1.0×)", fontsize="small"
        )
    fig.savefig(out_dir / "speedup.png")
    plt.close(fig)
