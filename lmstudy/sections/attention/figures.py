"""Section 5, attention alone: tables, figures, memory accounting and findings.

The functions that draw its figures (matplotlib).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.report.coverage import column  # noqa: E402
from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.attention.tables import LABELS, MIB, ratio_frame  # noqa: E402

# Colour and marker per implementation, line style per precision; naive compiled drawn over naive
# eager with open markers (and moved aside where their values are the same: see DODGE_OCTAVES).
IMPL_STYLE = {
    "naive": dict(color="tab:blue", marker="o", lw=2.4, ms=7, zorder=2),
    "naive-compile": dict(color="tab:orange", marker="s", lw=1.2, ms=5, mfc="white", zorder=3),
    "sdpa": dict(color="tab:green", marker="^", lw=1.6, ms=6, zorder=3),
}
PRECISION_LINES = {"fp32": "-", "bf16": "--"}


def _reference(ax, seq: pd.Series, values: pd.Series, power: int, label: str) -> None:
    """A slope ∝ seq^power through the series' last point: how N² (or N) growth looks on log axes."""
    if values.empty:
        return
    x0, y0 = float(seq.iloc[-1]), float(values.iloc[-1])
    xs = sorted(seq.unique())
    ax.plot(xs, [y0 * (x / x0) ** power for x in xs], ls=":", color="0.45", lw=1, zorder=1, label=label)


# Naive compiled keeps what naive eager keeps (the same saved tensors): equal memory would put one
# series exactly on the other. Where they coincide each is moved a little sideways, the legend says so.
DODGE_OCTAVES = 0.09
SAME = 0.01  # relative: within it two values are the same to a reader of a log axis


def _coincide(part: pd.DataFrame, y: str, precision: str) -> bool:
    """Whether naive eager's and naive compiled's `y` agree at every length both ran."""
    rows = part[(part["precision"] == precision) & (part["status"] == "ok")]
    wide = rows.pivot_table(index="seq_len", columns="implementation", values=y, aggfunc="first")
    if not {"naive", "naive-compile"} <= set(wide.columns):
        return False
    both = wide[["naive", "naive-compile"]].dropna()
    return len(both) > 0 and bool(((both["naive-compile"] / both["naive"] - 1).abs() <= SAME).all())


def figure(
    frame: pd.DataFrame, y: str, ylabel: str, scale: float = 1.0, slopes: bool = False
):
    """One panel per head size: `y` against sequence length, per implementation and precision;
    with `slopes`, the N² (naive) and N (SDPA) reference slopes. Returns the figure."""
    dims = sorted(frame["head_dim"].unique())
    fig, axes = plots.subplots(1, len(dims), figsize=(3.6 * len(dims) + 2.8, 3.4), sharey=True)
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
            label = f"{LABELS[impl]} {precision}"
            shift = 1.0
            if impl in ("naive", "naive-compile") and _coincide(part, y, precision):
                shift = 2 ** (DODGE_OCTAVES if impl == "naive-compile" else -DODGE_OCTAVES)
                if impl == "naive-compile":
                    label += " (= eager, moved aside)"
            drawn = ax.plot(
                good["seq_len"] * shift,
                good[y] / scale,
                ls=PRECISION_LINES.get(precision, ":"),
                label=label,
                **IMPL_STYLE[impl],
            )
            if y != "memory_before_backward_bytes" and "noisy" in good:
                # Noisy cells (the processes disagree beyond noise.max_spread): hollow, as in section 1.
                shaky = good[good["noisy"].fillna(False).astype(bool)]
                if len(shaky):
                    ax.scatter(shaky["seq_len"] * shift, shaky[y] / scale, s=70, facecolors="white",
                               edgecolors=drawn[0].get_color(), zorder=5, label="noisy (hollow)")
            if slopes and impl in ("naive", "sdpa") and precision == part["precision"].iloc[0]:
                power = 2 if impl == "naive" else 1
                _reference(ax, good["seq_len"], good[y] / scale, power, f"∝ seq{'²' if power == 2 else ''}")
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
    return fig


def _plot(
    frame: pd.DataFrame, y: str, ylabel: str, out: Path, scale: float = 1.0, slopes: bool = False
) -> None:
    fig = figure(frame, y, ylabel, scale, slopes)
    fig.savefig(out)
    plt.close(fig)


def draw_figures(frame: pd.DataFrame, out_dir: Path) -> None:
    """Step time, memory before backward and the compile speed-up, from the loaded table."""
    _plot(frame, "total_ms", "forward + backward median (ms)", out_dir / "time.png")
    if column(frame, "memory_before_backward_bytes").notna().any():
        _plot(
            frame,
            "memory_before_backward_bytes",
            "in use before backward (MiB)",
            out_dir / "memory.png",
            scale=MIB,
            slopes=True,
        )
    ratios = ratio_frame(frame, "naive", "naive-compile")
    if not ratios.empty:
        fig, axes = plots.subplots(figsize=(6.2, 3.4))
        ax = axes[0][0]
        # A log axis fitted to the speed-ups: an interval far wider (0.0035-456 at seq 1024) is cut at
        # its edge with its value written, hollow where it holds 1.
        limits = plots.ratio_limits(ratios["total"])
        for i, ((precision, d), line) in enumerate(ratios.groupby(["precision", "head_dim"])):
            line = line.sort_values("seq_len")
            plots.ratio_points(ax, line["seq_len"], line["total"], line.get("total_low"),
                               line.get("total_high"), limits, f"C{i}", f"d={int(d)} {precision}",
                               line="-" if precision == "fp32" else "--", slot=i)
        plots.reference_line(ax, label="eager (1.0×)")
        plots.power_of_two_ticks(ax, ratios["seq_len"])
        ax.set_ylabel("naive eager / compiled time (×, log)")
        ax.set_xlabel("sequence length; hollow: the interval holds 1 (not told apart)")
        plots.legend_outside(fig, axes)
        fig.savefig(out_dir / "compile_speedup.png")
        plt.close(fig)
