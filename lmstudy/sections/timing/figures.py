"""Section 1, end-to-end timing: the functions that draw its figures (matplotlib)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse.tables import steady_rows  # noqa: E402
from lmstudy.report.labels import PASS_LABELS, size_order  # noqa: E402
from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.timing.tables import KEY, speedup_frame, warmup_table  # noqa: E402

PRECISION_LINES = {"fp32": "-", "bf16": "--", "fp16": ":", "GPU time": "-", "wall time": "--"}


def _doubtful(frame: pd.DataFrame) -> pd.Series:
    """Rows the timing table marks host-bound or noisy (False where it has no such columns)."""
    marked = pd.Series(False, index=frame.index)
    for column in ("host_bound", "noisy"):
        if column in frame:
            marked |= frame[column].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))
    return marked


def _plot_by_pass(frame, y, ylabel, out: Path, logy=True, missing=None, ratio=False):
    """One panel per pass, a line per size and precision over context length; `missing`
    (rows with a status other than ok) marked where their points would be."""
    passes = [p for p in PASS_LABELS if p in set(frame["pass"])]
    fig, axes = plots.subplots(1, len(passes), figsize=(3.6 * len(passes) + 1.6, 3.4))
    # One colour per size (light to dark, small to large), one line style per precision.
    sizes = size_order(frame["size"].astype(str))
    palette = plt.get_cmap("viridis")
    hue = {s: palette(0.85 - 0.85 * i / max(len(sizes) - 1, 1)) for i, s in enumerate(sizes)}
    doubtful = _doubtful(frame)
    # Ratios: a log axis fitted to the points, an interval past it cut at the edge with its value
    # written, hollow where the interval holds 1 (plots.ratio_points).
    limits = plots.ratio_limits(frame[y]) if ratio else None
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = frame[frame["pass"] == pass_name]
        for slot, ((size, precision), line) in enumerate(part.groupby(["size", "precision"], observed=True)):
            line = line.sort_values("context_length")
            style = PRECISION_LINES.get(precision, "-.")
            color = hue[str(size)]
            label = f"{size} {precision}"
            if ratio:
                ax.plot(line["context_length"], line[y], style, color=color, label=label)
                plots.ratio_points(ax, line["context_length"], line[y], line.get(f"{y}_low"),
                                   line.get(f"{y}_high"), limits, color, label,
                                   marker="s" if precision == "GPU time" else "o", annotate=False, slot=slot)
                continue
            ax.plot(line["context_length"], line[y], style, marker="o", color=color, label=label)
            if {f"{y}_low", f"{y}_high"} <= set(line) and line[f"{y}_low"].notna().any():
                # The interval the value's processes allow, where the rows carry one.
                ax.errorbar(line["context_length"], line[y],
                            yerr=[(line[y] - line[f"{y}_low"]).clip(lower=0),
                                  (line[f"{y}_high"] - line[y]).clip(lower=0)],
                            fmt="none", ecolor=color, capsize=3, linewidth=0.8)
            # Host-bound or noisy cells (the table's own marks, where it has them): hollow points.
            shaky = line[doubtful.reindex(line.index, fill_value=False)]
            if len(shaky):
                ax.scatter(shaky["context_length"], shaky[y], s=60, facecolors="white", edgecolors=color,
                           zorder=4, label="host-bound or noisy (hollow)")
        contexts = set(part["context_length"])
        if missing is not None:
            contexts |= set(missing[missing["pass"] == pass_name]["context_length"])
        plots.power_of_two_ticks(ax, contexts)
        if ratio:
            plots.reference_line(ax)
            ax.set_xlabel("context length; hollow: the interval holds 1")
        elif logy:
            plots.plain_log(ax, "y")
        if missing is not None:
            _mark_missing(ax, missing[missing["pass"] == pass_name], logy)
        ax.set_title(PASS_LABELS[pass_name])
        if not ratio:
            ax.set_xlabel("context length")
        ax.set_ylabel(ylabel)
    plots.legend_outside(fig, axes)
    fig.savefig(out)
    plt.close(fig)


def _mark_missing(ax, gone: pd.DataFrame, logy: bool) -> None:
    """The sizes that ran out of memory (or did not apply) at a context, written above where their points
    would be."""
    if len(gone):
        top = plots.room_above(ax, log=logy)
        for (context, status), rows in gone.groupby(["context_length", "status"]):
            sizes = ", ".join(dict.fromkeys(str(s) for s in rows["size"]))
            plots.mark_missing(ax, context, top, f"{sizes}: {status}")


def draw_figures(frame: pd.DataFrame, out_dir: Path) -> None:
    """Latency, warm-up and bf16 speed-up, from the study model's rows."""
    ok = frame[frame["status"] == "ok"]
    failed = steady_rows(frame)[steady_rows(frame)["status"] != "ok"]
    if not ok.empty:
        latency = out_dir / "latency.png"
        _plot_by_pass(steady_rows(ok), "median_ms", "median step time (ms)", latency, missing=failed)

        if not _warmup_windows(frame, out_dir / "warmup.png"):
            _overlapping_warmup(ok, out_dir / "warmup.png")
    _speedup_figure(frame, out_dir)


def _warmup_windows(frame: pd.DataFrame, out: Path) -> bool:
    """Step 1, step 2 and steps 3 to the steady window's start, each over the steady window: windows
    that share no step (timing.tables.warmup_table), one point per configuration, hollow where it is
    host-bound or noisy. False where the run kept no per-step trajectories."""
    table = warmup_table(frame)
    if "step 1 ms" not in table or table.empty:
        return False
    steady = next(c for c in table if c.endswith("(steady) ms"))
    windows = [c for c in table if c.endswith(" ms") and c != steady]
    fig, axes = plots.subplots(figsize=(6.4, 3.4))
    ax = axes[0][0]
    flagged = table["flags"].astype(str).str.len() > 0
    rng = np.random.default_rng(0)  # a fixed jitter, so that points of one window do not hide each other
    for i, window in enumerate(windows):
        ratio = table[window] / table[steady]
        x = i + rng.uniform(-0.15, 0.15, len(ratio))
        ax.scatter(x[~flagged.to_numpy()], ratio[~flagged], color="C0", s=22, zorder=3,
                   label="neither host-bound nor noisy")
        ax.scatter(x[flagged.to_numpy()], ratio[flagged], facecolors="white", edgecolors="C0", s=22,
                   zorder=3, label="host-bound or noisy (†‡)")
    plots.reference_line(ax, label="steady window")
    ax.set_xticks(range(len(windows)), [w.removesuffix(" ms") for w in windows])
    ax.set_xlim(-0.5, len(windows) - 0.5)
    ax.set_ylabel(f"median time / {steady.removesuffix(' ms')} (×)")
    plots.plain_log(ax, "y")
    plots.legend_outside(fig, axes)
    ax.set_title("Warm-up: windows that share no step, one point per configuration", fontsize="small")
    ax.set_xlabel("steps of a fresh process")
    fig.savefig(out)
    plt.close(fig)
    return True


def _overlapping_warmup(ok: pd.DataFrame, out: Path) -> None:
    """Runs without per-step trajectories: each warm-up's window (they overlap) against the steady one."""
    if not ok.empty:
        fig, axes = plots.subplots(1, 2, figsize=(9, 3.4))
        steady_mean = steady_rows(ok).set_index(KEY)["mean_ms"]
        for warmup, part in ok.groupby("warmup_steps"):
            ratio = part.set_index(KEY)["mean_ms"] / steady_mean.reindex(part.set_index(KEY).index)
            axes[0][0].scatter(np.full(len(ratio), warmup), ratio, alpha=0.6)
            axes[0][1].scatter(np.full(len(part), warmup), part["cv"], alpha=0.6)
        plots.reference_line(axes[0][0], label="steady state")
        axes[0][0].set_ylabel("mean step time / steady-state mean (×)")
        axes[0][1].set_ylabel("coefficient of variation")
        for ax in axes[0]:
            plots.plain_log(ax, "y")
            ax.set_xlabel("warm-up steps")
            ax.set_xticks(sorted(ok["warmup_steps"].unique()))
        fig.suptitle("Warm-up effect (one point per configuration; the warm-up windows overlap)")
        fig.savefig(out)
        plt.close(fig)


def _speedup_figure(frame: pd.DataFrame, out_dir: Path) -> None:
    speedups = speedup_frame(frame)
    if not speedups.empty:
        # Wall time (what the user waits for; hollow where the host sets it) beside GPU time (what the
        # GPU gains), each with the interval its processes allow.
        series = [speedups.assign(precision="wall time")]
        if "gpu_speedup" in speedups and speedups["gpu_speedup"].notna().any():
            series.append(speedups.assign(
                precision="GPU time", speedup=speedups["gpu_speedup"],
                speedup_low=speedups["gpu_speedup_low"], speedup_high=speedups["gpu_speedup_high"],
                host_bound=False, noisy=False))
        ylabel = "bf16 speed-up over fp32 (×)"
        _plot_by_pass(pd.concat(series, ignore_index=True), "speedup", ylabel, out_dir / "speedup.png",
                      ratio=True)
