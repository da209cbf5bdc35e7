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
    """The speed-up of torch.compile per pass and size, from the comparison table: wall time with its
    interval (hollow where it holds 1: not told apart) beside the GPU's busy time with its processes'
    range, on a log axis fitted to the speed-ups (an interval past it is cut at the edge, its value
    written there)."""
    passes = [p for p in PASS_LABELS if p in set(comp["pass"])]
    fig, axes = plots.subplots(1, len(passes), figsize=(3.8 * len(passes) + 1.6, 3.4))
    measures = (("wall time", "speedup", "eager_ci_low_ms", "o"), ("GPU busy time", "gpu_speedup", None, "s"))
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = comp[comp["pass"] == pass_name]
        groups = list(part.groupby(["precision", "attention"], observed=True))
        sizes = [s for s in part["size"].cat.categories if s in set(part["size"])]
        slots = len(groups) * len(measures)
        width = 0.8 / max(slots, 1)
        values = [v for column in ("speedup", "gpu_speedup") if column in part
                  for v in pd.to_numeric(part[column], errors="coerce").dropna()]
        limits = plots.ratio_limits(values)
        plots.reference_line(ax, label="eager (1.0×)")
        missing = []
        for i, ((precision, attention), g) in enumerate(groups):
            g = g.set_index("size").reindex(sizes)
            color = f"C{i}"
            for m, (measure, column, bounds, marker) in enumerate(measures):
                if column not in g or not g[column].notna().any():
                    continue
                x = [j - 0.4 + width * (i * len(measures) + m + 0.5) for j in range(len(sizes))]
                if bounds:  # the speed-up's interval from the two modes' intervals (far ends)
                    low = g["eager_ci_low_ms"] / g["compiled_ci_high_ms"]
                    high = g["eager_ci_high_ms"] / g["compiled_ci_low_ms"]
                else:  # the extremes of one mode's processes over the other's
                    low, high = g.get("gpu_speedup_low"), g.get("gpu_speedup_high")
                name = f"{measure}" if len(groups) == 1 else f"{precision} {attention}, {measure}"
                plots.ratio_points(ax, x, g[column], low, high, limits, color, name, marker=marker, slot=i)
            for j, (speedup, eager, compiled) in enumerate(
                zip(g["speedup"], g["eager_status"], g["compiled_status"], strict=True)
            ):
                if speedup != speedup:
                    status = next((s for s in (compiled, eager) if s == s and s != "ok"), "not measured")
                    missing.append((j, status, color))
        ax.set_xticks(range(len(sizes)), sizes)
        ax.set_xlim(-0.6, len(sizes) - 0.4)
        for xi, status, color in missing:
            plots.mark_missing(ax, xi, limits[0] * 1.3, status, color)
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_ylabel("eager / compiled time (×, log)")
        ax.set_xlabel("hollow: the wall-time interval holds 1 (not told apart)", fontsize="x-small")
    plots.legend_outside(fig, axes)
    series = comp[["precision", "attention"]].drop_duplicates()
    if len(series) == 1:
        only = series.iloc[0]
        fig.suptitle(f"{only['precision']}, {only['attention']} attention", fontsize="small")
    fig.savefig(out_dir / "speedup.png")
    plt.close(fig)
