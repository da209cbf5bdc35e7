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
from lmstudy.report.labels import PASS_LABELS, size_order  # noqa: E402
from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.memory.tables import GIB  # noqa: E402

PHASE_COLORS = {"forward": "tab:blue", "backward": "tab:orange", "optimizer": "tab:green", "step": "tab:gray"}


def _timeline_figure(results: Path, rows: pd.DataFrame, out: Path) -> bool:
    """One pass of one size: a panel per precision (rows) and context (columns); whether any was drawn."""
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
            match = rows[(rows["precision"] == precision) & (rows["context_length"] == ctx)]
            drew |= _timeline_panel(axes[r][c], results, match, precision, ctx)
        axes[r][0].set_ylabel("allocated GiB")
    first = rows.iloc[0]
    fig.suptitle(
        f"Allocated memory during one {PASS_LABELS[first['pass']]} of {first['size']}",
        fontsize="medium",
    )
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    handles, labels = _phase_legend(axes)
    # A lone phase (a forward pass) needs no legend: the title names it.
    if len(handles) > 1:
        fig.legend(handles, labels, loc="center right", fontsize="small", title="phase")
    if drew:
        fig.savefig(out)
    plt.close(fig)
    return drew


def _timeline_panel(ax, results: Path, match: pd.DataFrame, precision: str, ctx) -> bool:
    """One snapshot's allocated memory over its step, phases shaded, its peak dotted; whether drawn."""
    ax.set_title(f"{precision}, context {ctx}", fontsize="small")
    if match.empty:
        ax.text(0.5, 0.5, "not run", ha="center", transform=ax.transAxes)
        return False
    row = match.iloc[0]
    if pd.isna(row.get("summary_dir")):
        return False  # no summary of this snapshot was recorded
    timeline_path = results / row["summary_dir"] / "timeline.csv"
    if not timeline_path.exists():
        return False
    line = result_files.read_csv(timeline_path)
    summary = result_files.read_json(results / row["summary_dir"] / "summary.json")
    # Time, not the allocator's event count: the trace records when each event happened.
    timed = "time_ms" in line and line["time_ms"].notna().all()
    x = line["time_ms"] if timed else line["index"]
    _shade_phases(ax, summary["phases"], pd.Series(x.to_numpy(), index=line["index"].to_numpy()), timed)
    ax.step(x, line["allocated_bytes"] / GIB, where="post", color="black", lw=1)
    ax.axhline(row["peak_bytes"] / GIB, color="red", lw=0.8, ls=":")
    if row["status"] != "ok":
        ax.set_title(f"{precision}, context {ctx}: {row['status']}", fontsize="small", color="red")
    ax.set_xlabel("time in the step (ms)" if timed else "allocator event")
    return True


def _shade_phases(ax, phases: list[dict], at: pd.Series, timed: bool) -> None:
    """Each phase's span shaded in its colour; `at`: the x of each event index (its time where timed)."""
    for span in phases:
        if span["phase"] in PHASE_COLORS:
            start = at.asof(span["start_index"]) if timed else span["start_index"]
            end = at.asof(span["end_index"]) if timed else span["end_index"] + 1
            ax.axvspan(start, end, alpha=0.15, lw=0, color=PHASE_COLORS[span["phase"]], label=span["phase"])


def _phase_legend(axes) -> tuple[list, list[str]]:
    """The phases shaded in any panel, each once, in the order first drawn."""
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def _timeline_name(size, pass_name) -> str:
    return f"timeline_{size}_{pass_name}.png"


# Colour and marker by what is measured, line style and fill by precision (DESIGN: one style).
# Two series of equal values (fp32's and bf16's training step: the optimizer's peak) would hide
# one another at the same x: each series is dodged sideways, so every one of them shows.
PEAK_MEASURES = {"forward": "forward", "train_step": "training step",
                 "forward phase": "training step, forward phase"}
PEAK_COLORS = {"forward": "tab:blue", "train_step": "tab:red", "forward phase": "tab:purple"}
PEAK_MARKERS = {"forward": "o", "train_step": "s", "forward phase": "D"}
PRECISION_STYLE = {"fp32": dict(ls="-", mfc=None), "bf16": dict(ls="--", mfc="white"),
                   "fp16": dict(ls=":", mfc="white")}
# How far apart two series sit: a share of an octave of context (lines), of a slot (points).
DODGE_OCTAVES = 0.05
DODGE_SLOT = 0.16


def _phase_peaks(results: Path, rows: pd.DataFrame) -> pd.Series:
    """The forward phase's peak of each training-step row (bytes): the row's own column where the
    summary wrote one, else from its timeline."""
    peaks = {}
    for index, row in rows.iterrows():
        if pd.notna(row.get("forward_phase_peak_bytes")):
            peaks[index] = row["forward_phase_peak_bytes"]
            continue
        if "summary_dir" not in row or pd.isna(row["summary_dir"]):
            continue
        line = result_files.read_csv(results / row["summary_dir"] / "timeline.csv", missing_ok=True)
        if not line.empty and (line["phase"] == "forward").any():
            peaks[index] = line.loc[line["phase"] == "forward", "allocated_bytes"].max()
    return pd.Series(peaks, dtype=float)


def _peak_series(results: Path, part: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(measure, precision, rows with context_length, gib and status) of one size, in the legend's order."""
    series = []
    precisions = [p for p in PRECISION_STYLE if p in set(part["precision"])]
    precisions += [p for p in dict.fromkeys(part["precision"]) if p not in precisions]
    for measure in PEAK_MEASURES:
        for precision in precisions:
            pass_name = "train_step" if measure == "forward phase" else measure
            rows = part[(part["pass"] == pass_name) & (part["precision"] == precision)]
            rows = rows.sort_values("context_length")
            if rows.empty:
                continue
            if measure == "forward phase":
                # Where context shows in a training step: the forward phase, under the optimizer's peak.
                peaks = _phase_peaks(results, rows[rows["status"] == "ok"])
                if peaks.empty:
                    continue
                rows = rows.loc[peaks.index].assign(gib=peaks / GIB)
            else:
                rows = rows.assign(gib=rows["peak_bytes"] / GIB)
            series.append((measure, precision, rows[["context_length", "gib", "status"]]))
    return series


def peaks_figure(results: Path, frame: pd.DataFrame):
    """Peak memory per size: forward, training step and the training step's forward phase, per
    precision. Over several contexts, lines against context (log2); over one, labelled points,
    one slot per measure (a line of one point says nothing about context). Returns the figure."""
    sizes = size_order(frame["size"])
    contexts = sorted(frame["context_length"].unique())
    single = len(contexts) == 1
    fig, axes = plots.subplots(1, len(sizes), figsize=(4.6 * len(sizes) + 2.6, 3.8))
    for ax, size in zip(axes[0], sizes, strict=True):
        part = frame[frame["size"] == size].reset_index(drop=True)
        series = _peak_series(results, part)
        measures = [m for m in PEAK_MEASURES if any(s[0] == m for s in series)]
        for i, (measure, precision, rows) in enumerate(series):
            style = PRECISION_STYLE.get(precision, dict(ls="-.", mfc="white"))
            label = f"{PEAK_MEASURES[measure]} {precision}"
            common = dict(color=PEAK_COLORS[measure], marker=PEAK_MARKERS[measure], ms=7,
                          mfc=style["mfc"] or PEAK_COLORS[measure], mew=1.4, label=label, zorder=3)
            ok = rows[rows["status"] == "ok"] if measure != "forward phase" else rows
            if single:
                precisions = [p for m, p, _ in series if m == measure]
                slot = measures.index(measure)
                x = slot + (precisions.index(precision) - (len(precisions) - 1) / 2) * 2 * DODGE_SLOT
                xs = [x] * len(rows)
                ax.plot([x] * len(ok), ok["gib"], ls="none", **common)
                for value in ok["gib"]:
                    ax.annotate(f"{value:.2f}", (x, value), textcoords="offset points", xytext=(6, 0),
                                va="center", fontsize="x-small", color=PEAK_COLORS[measure])
            else:
                shift = 2 ** ((i - (len(series) - 1) / 2) * DODGE_OCTAVES)
                xs = rows["context_length"] * shift
                ax.plot(ok["context_length"] * shift, ok["gib"], ls=style["ls"], lw=1.4, **common)
            oom = rows["status"].to_numpy() != "ok"
            if oom.any():
                ax.scatter(pd.Series(xs)[oom], rows["gib"][oom], marker="x", s=80, color="red",
                           zorder=4, label="OOM (peak before failing)")
        if single:
            ax.set_xticks(range(len(measures)),
                          [PEAK_MEASURES[m].replace(", ", ",\n") for m in measures], fontsize="small")
            ax.set_xlim(-0.5, len(measures) - 0.5)
            ax.set_xlabel(f"context length {contexts[0]}")
        else:
            plots.power_of_two_ticks(ax, part["context_length"])
            ax.set_xlabel("context length")
        ax.set_ylabel("peak allocated (GiB)")
        ax.set_title(str(size))
    plots.legend_outside(fig, axes)
    return fig


def draw_figures(results: Path, frame: pd.DataFrame, out_dir: Path) -> None:
    """The timelines (from the snapshots under `results`) and the peaks, from the measured rows."""
    for (size, pass_name), rows in frame.groupby(["size", "pass"], observed=True):
        _timeline_figure(results, rows, out_dir / _timeline_name(size, pass_name))
    fig = peaks_figure(results, frame)
    fig.savefig(out_dir / "peaks.png")
    plt.close(fig)
