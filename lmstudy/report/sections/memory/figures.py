"""Section 4, memory: peaks, memory by kind, timelines and largest allocations.

The functions that draw its figures (matplotlib).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS, size_order  # noqa: E402
from lmstudy.report.sections.memory.tables import GIB  # noqa: E402

PHASE_COLORS = {"forward": "tab:blue", "backward": "tab:orange", "optimizer": "tab:green", "step": "tab:gray"}


def _timeline_figure(results: Path, rows: pd.DataFrame, out: Path) -> bool:
    precisions = list(dict.fromkeys(rows["precision"]))
    contexts = sorted(rows["context_length"].unique())
    fig, axes = plt.subplots(
        len(precisions),
        len(contexts),
        # Wide enough for the title and the phase legend beside the panels.
        figsize=(max(6.0, 3.6 * len(contexts) + 1.6), 2.8 * len(precisions) + 0.6),
        squeeze=False,
        # Each panel its own y range: fp32's activations are a small change on top of the model,
        # and a range shared with bf16's would flatten them.
        sharey=False,
    )
    drew = False
    for r, precision in enumerate(precisions):
        for c, ctx in enumerate(contexts):
            ax = axes[r][c]
            match = rows[(rows["precision"] == precision) & (rows["context_length"] == ctx)]
            ax.set_title(f"{precision}, context {ctx}", fontsize="small")
            if match.empty:
                ax.text(0.5, 0.5, "not run", ha="center", transform=ax.transAxes)
                continue
            row = match.iloc[0]
            timeline_path = results / row["summary_dir"] / "timeline.csv"
            if not timeline_path.exists():
                continue
            line = result_files.read_csv(timeline_path)
            summary = result_files.read_json(results / row["summary_dir"] / "summary.json")
            # Time, not the allocator's event count: the trace records when each event happened.
            timed = "time_ms" in line and line["time_ms"].notna().all()
            x = line["time_ms"] if timed else line["index"]
            at = pd.Series(x.to_numpy(), index=line["index"].to_numpy())
            for span in summary["phases"]:
                if span["phase"] in PHASE_COLORS:
                    start = at.asof(span["start_index"]) if timed else span["start_index"]
                    end = at.asof(span["end_index"]) if timed else span["end_index"] + 1
                    ax.axvspan(
                        start,
                        end,
                        alpha=0.15,
                        lw=0,
                        color=PHASE_COLORS[span["phase"]],
                        label=span["phase"],
                    )
            ax.step(x, line["allocated_bytes"] / GIB, where="post", color="black", lw=1)
            ax.axhline(row["peak_bytes"] / GIB, color="red", lw=0.8, ls=":")
            if row["status"] != "ok":
                ax.set_title(f"{precision}, context {ctx}: {row['status']}", fontsize="small", color="red")
            ax.set_xlabel("time in the step (ms)" if timed else "allocator event")
            drew = True
        axes[r][0].set_ylabel("allocated GiB")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    first = rows.iloc[0]
    fig.suptitle(
        f"Allocated memory during one {PASS_LABELS[first['pass']]} of {first['size']}",
        fontsize="medium",
    )
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    # A lone phase (a forward pass) needs no legend: the title names it.
    if len(handles) > 1:
        fig.legend(handles, labels, loc="center right", fontsize="small", title="phase")
    if drew:
        fig.savefig(out)
    plt.close(fig)
    return drew


def _timeline_name(size, pass_name) -> str:
    return f"timeline_{size}_{pass_name}.png"


# Colour by what is measured, line and marker by precision (DESIGN: one style); bf16 drawn over
# fp32 with open markers, so equal values show both lines, not one.
PEAK_COLORS = {"forward": "tab:blue", "train_step": "tab:red", "forward phase": "tab:purple"}
PRECISION_STYLE = {"fp32": dict(ls="-", marker="o", lw=2.2, zorder=2),
                   "bf16": dict(ls="--", marker="s", lw=1.2, mfc="white", zorder=3)}


def _phase_peaks(results: Path, rows: pd.DataFrame) -> pd.Series:
    """The forward phase's peak of each training-step row (bytes), from its timeline."""
    peaks = {}
    for index, row in rows.iterrows():
        line = result_files.read_csv(results / row["summary_dir"] / "timeline.csv", missing_ok=True)
        if not line.empty and (line["phase"] == "forward").any():
            peaks[index] = line.loc[line["phase"] == "forward", "allocated_bytes"].max()
    return pd.Series(peaks, dtype=float)


def draw_figures(results: Path, frame: pd.DataFrame, out_dir: Path) -> None:
    """The timelines (from the snapshots under `results`) and the peaks, from the measured rows."""
    for (size, pass_name), rows in frame.groupby(["size", "pass"], observed=True):
        _timeline_figure(results, rows, out_dir / _timeline_name(size, pass_name))
    sizes = size_order(frame["size"])
    fig, axes = plots.subplots(1, len(sizes), figsize=(4.2 * len(sizes) + 2.4, 3.6))
    for ax, size in zip(axes[0], sizes, strict=True):
        part = frame[frame["size"] == size]
        for (pass_name, precision), line in part.groupby(["pass", "precision"], observed=True):
            line = line.sort_values("context_length")
            style = PRECISION_STYLE.get(precision, dict(ls=":", marker="^"))
            ax.plot(
                line["context_length"],
                line["peak_bytes"] / GIB,
                color=PEAK_COLORS.get(pass_name),
                label=f"{PASS_LABELS[pass_name]} {precision}",
                **style,
            )
            if pass_name == "train_step":
                # Where context shows in a training step: the forward phase, under the optimizer's peak.
                forward = _phase_peaks(results, line)
                if len(forward):
                    ax.plot(
                        line.loc[forward.index, "context_length"],
                        forward / GIB,
                        color=PEAK_COLORS["forward phase"],
                        label=f"training step, forward phase {precision}",
                        **style,
                    )
            oom = line[line["status"] != "ok"]
            ax.scatter(
                oom["context_length"],
                oom["peak_bytes"] / GIB,
                marker="x",
                s=80,
                color="red",
                zorder=3,
                label="OOM (peak before failing)" if len(oom) else None,
            )
        plots.power_of_two_ticks(ax, part["context_length"])
        ax.set_xlabel("context length")
        ax.set_ylabel("peak allocated (GiB)")
        ax.set_title(str(size))
    plots.legend_outside(fig, axes)
    fig.savefig(out_dir / "peaks.png")
    plt.close(fig)
