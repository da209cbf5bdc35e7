"""Section 4, memory: peaks, memory by kind, timelines and largest allocations."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.analyse.computed import computes_table  # noqa: E402
from lmstudy.analyse.memory.kinds import KINDS  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS, order_sizes, size_order  # noqa: E402

KIND_LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "activations": "activations (from forward)",
    "temporaries": "temporaries (backward, optimizer)",
    "other": "other (inputs, buffers, cuBLAS workspace)",
    "before_recording": "before recording (unidentified)",
}
PHASE_COLORS = {"forward": "tab:blue", "backward": "tab:orange", "optimizer": "tab:green", "step": "tab:gray"}
GIB = 2**30
MEMORY_VIZ = "https://pytorch.org/memory_viz"


def load(results: Path) -> pd.DataFrame:
    path = results / "memory" / "memory.csv"
    frame = result_files.read_csv(path, missing_ok=True)
    if frame.empty:
        return frame
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(PASS_LABELS), ordered=True)
    order_sizes(frame)
    return frame.sort_values(["size", "pass", "precision", "context_length"]).reset_index(drop=True)


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with a snapshot to analyze (ok, or OOM during the recorded step)."""
    if "peak_bytes" not in frame:
        return frame.iloc[0:0]
    return frame[frame["peak_bytes"].notna()]


def _label(row) -> str:
    return f"{row['size']} ctx {row['context_length']} {PASS_LABELS[row['pass']]} {row['precision']}"


def _gib_or_status(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return frame["status"].astype(object)
    values = (frame[column] / GIB).astype(object)
    return values.where(frame["status"] == "ok", frame["status"] + " (" + values.astype(str) + ")").where(
        frame[column].notna(), frame["status"]
    )


@computes_table
def peak_table(frame: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "size": frame["size"],
            "context": frame["context_length"],
            "pass": frame["pass"].map(PASS_LABELS),
            "precision": frame["precision"],
            "status": frame["status"],
            "peak GiB (snapshot)": frame.get("peak_bytes", pd.Series(dtype=float)) / GIB,
            "max_memory_allocated GiB": frame.get("max_memory_allocated", pd.Series(dtype=float)) / GIB,
            "difference %": frame.get("peak_vs_allocator", pd.Series(dtype=float)) * 100,
            "peak in phase": frame.get("peak_phase", pd.Series(dtype=object)),
        }
    )
    if "stage" in frame:
        oom = frame["status"] == "OOM"
        table.loc[oom, "status"] = "OOM in " + frame.loc[oom, "stage"].astype(str)
    return table


@computes_table
def kinds_table(rows: pd.DataFrame) -> pd.DataFrame:
    kinds = [k for k in KINDS if f"{k}_bytes" in rows and rows[f"{k}_bytes"].fillna(0).any()]
    table = pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            "pass": rows["pass"].map(PASS_LABELS),
            "precision": rows["precision"],
        }
    )
    for kind in kinds:
        table[f"{KIND_LABELS[kind]} GiB"] = rows[f"{kind}_bytes"] / GIB
    table["total GiB"] = rows["peak_bytes"] / GIB
    return table


@computes_table
def residual_table(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows[rows.get("residual_stream_bytes", pd.Series(dtype=float)).notna()]
    rows = rows.drop_duplicates(["size", "context_length", "precision"])
    return pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            "precision": rows["precision"],
            "batch": rows["batch_size"],
            "d_model": rows["d_model"],
            "residual dtype (observed)": rows["residual_dtype"],
            "one residual-stream activation MiB": rows["residual_stream_bytes"] / 2**20,
        }
    )


@computes_table
def largest_table(results: Path, row, top: int = 5) -> pd.DataFrame:
    path = results / row["summary_dir"] / "largest_allocations.csv"
    frame = result_files.read_csv(path, missing_ok=True).head(top)
    if frame.empty:
        return frame
    return pd.DataFrame(
        {
            "size MiB": frame["size_bytes"] / 2**20,
            "count": frame["count"],
            "phase": frame["phases"],
            "kind": frame["kinds"],
            "made by (innermost user frames)": frame["stack"],
        }
    ).fillna({"made by (innermost user frames)": "(no Python frame: made in C++, e.g. autograd)"})


def _timeline_figure(results: Path, rows: pd.DataFrame, out: Path) -> bool:
    precisions = list(dict.fromkeys(rows["precision"]))
    contexts = sorted(rows["context_length"].unique())
    fig, axes = plt.subplots(
        len(precisions),
        len(contexts),
        # Wide enough for the title and the phase legend beside the panels.
        figsize=(max(6.0, 3.6 * len(contexts) + 1.6), 2.8 * len(precisions) + 0.6),
        squeeze=False,
        sharey=True,
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
            for span in summary["phases"]:
                if span["phase"] in PHASE_COLORS:
                    ax.axvspan(
                        span["start_index"],
                        span["end_index"] + 1,
                        alpha=0.15,
                        lw=0,
                        color=PHASE_COLORS[span["phase"]],
                        label=span["phase"],
                    )
            ax.step(line["index"], line["allocated_bytes"] / GIB, where="post", color="black", lw=1)
            ax.axhline(row["peak_bytes"] / GIB, color="red", lw=0.8, ls=":")
            if row["status"] != "ok":
                ax.set_title(f"{precision}, context {ctx}: {row['status']}", fontsize="small", color="red")
            ax.set_xlabel("allocator event")
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
    if handles:
        fig.legend(handles, labels, loc="center right", fontsize="small", title="phase")
    if drew:
        fig.savefig(out)
    plt.close(fig)
    return drew


def _timeline_name(size, pass_name) -> str:
    return f"timeline_{size}_{pass_name}.png"


def make_figures(results: Path, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = measured(load(results))
    if frame.empty:
        return
    for (size, pass_name), rows in frame.groupby(["size", "pass"], observed=True):
        _timeline_figure(results, rows, out_dir / _timeline_name(size, pass_name))
    sizes = size_order(frame["size"])
    fig, axes = plots.subplots(1, len(sizes), figsize=(4.2 * len(sizes) + 2.0, 3.4))
    for ax, size in zip(axes[0], sizes, strict=True):
        part = frame[frame["size"] == size]
        for (pass_name, precision), line in part.groupby(["pass", "precision"], observed=True):
            line = line.sort_values("context_length")
            style = "-" if precision == "fp32" else "--"
            ax.plot(
                line["context_length"],
                line["peak_bytes"] / GIB,
                style,
                marker="o",
                label=f"{PASS_LABELS[pass_name]} {precision}",
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


def findings(frame: pd.DataFrame) -> list[str]:
    items = []
    rows = measured(frame)
    ok = rows[rows["status"] == "ok"]
    agree = rows[rows["peak_vs_allocator"].notna()] if "peak_vs_allocator" in rows else rows.iloc[0:0]
    if len(agree):
        worst = agree.loc[agree["peak_vs_allocator"].abs().idxmax()]
        items.append(
            f"The snapshot's peak agrees with torch.cuda.max_memory_allocated() within "
            f"{abs(worst['peak_vs_allocator']) * 100:.3f}% in all {len(agree)} snapshots "
            f"(largest difference: {_label(worst)})."
        )
    for _, row in frame[frame["status"] == "OOM"].iterrows():
        peak = (
            f"; {row['peak_bytes'] / GIB:.1f} GiB were allocated when it failed"
            if pd.notna(row.get("peak_bytes"))
            else ""
        )
        items.append(f"{_label(row)} ran out of memory during {row['stage']}{peak}.")
    wide = ok.pivot_table(
        index=["size", "context_length", "precision"], columns="pass", values="peak_bytes", observed=True
    )
    if {"forward", "train_step"} <= set(wide.columns):
        ratio = (wide["train_step"] / wide["forward"]).dropna()
        if len(ratio):
            items.append(
                f"A training step's peak is {ratio.min():.1f}× to {ratio.max():.1f}× the forward "
                f"pass's (median {ratio.median():.1f}× over {len(ratio)} configurations)."
            )
    by_precision = ok.pivot_table(
        index=["size", "context_length", "pass"], columns="precision", values="peak_bytes", observed=True
    )
    if {"fp32", "bf16"} <= set(by_precision.columns):
        for pass_name in PASS_LABELS:
            part = (
                by_precision.xs(pass_name, level="pass")
                if pass_name in by_precision.index.get_level_values("pass")
                else None
            )
            if part is None:
                continue
            ratio = (part["bf16"] / part["fp32"]).dropna()
            if len(ratio):
                median = ratio.median()
                verb = (
                    "leaves the peak unchanged at"
                    if abs(median - 1) < 0.005
                    else ("raises" if median > 1 else "lowers") + " the peak to"
                )
                items.append(
                    f"{PASS_LABELS[pass_name].capitalize()}: bf16 autocast {verb} a median "
                    f"{median:.2f}× the fp32 peak (range {ratio.min():.2f}× to {ratio.max():.2f}×)."
                )
    for (size, pass_name, precision), part in ok.groupby(["size", "pass", "precision"], observed=True):
        part = part.sort_values("context_length")
        if len(part) >= 2:
            lo, hi = part.iloc[0], part.iloc[-1]
            items.append(
                f"{size} {PASS_LABELS[pass_name]} {precision}: from context {lo['context_length']} to "
                f"{hi['context_length']} the peak grows from {lo['peak_bytes'] / GIB:.2f} to "
                f"{hi['peak_bytes'] / GIB:.2f} GiB (+{(hi['peak_bytes'] - lo['peak_bytes']) / GIB:.2f} GiB)."
            )
    train = ok[ok["pass"] == "train_step"]
    if len(train):
        row = train.loc[train["peak_bytes"].idxmax()]
        shares = {k: row.get(f"{k}_bytes", 0) or 0 for k in KINDS}
        top = sorted(((v, k) for k, v in shares.items() if v), reverse=True)[:3]
        parts = ", ".join(
            f"{KIND_LABELS[k]} {v / GIB:.2f} GiB ({v / row['peak_bytes'] * 100:.0f}%)" for v, k in top
        )
        items.append(
            f"At the largest training-step peak ({_label(row)}, in the {row['peak_phase']} "
            f"phase) memory is {parts}."
        )
        phases = train["peak_phase"].value_counts()
        items.append(
            "The training step peaks in the "
            + ", ".join(f"{phase} phase in {n} of {len(train)}" for phase, n in phases.items())
            + " configurations."
        )
        ratio = (
            train["activations_bytes"] / train["residual_stream_bytes"]
            if {"residual_stream_bytes", "activations_bytes"} <= set(train.columns)
            else pd.Series(dtype=float)
        )
        if ratio.max() >= 1:
            items.append(
                f"Activations from forward still live at a training step's peak are "
                f"{ratio.min():.0f}× to {ratio.max():.0f}× one residual-stream activation "
                f"(batch × context × d_model × bytes)."
            )
    return items


def _method_text(frame: pd.DataFrame) -> str:
    warmup = frame["warmup_steps"].dropna() if "warmup_steps" in frame else pd.Series(dtype=float)
    after = f"{int(warmup.iloc[0])} warm-up steps" if len(warmup) else "warm-up"
    return (
        f"Each configuration records one step with torch.cuda.memory._record_memory_history "
        f"(stacks='python') after {after}, then dumps a snapshot. The peak counts the blocks "
        "allocated before recording began (parameters, optimizer state, the previous step's "
        "gradients), rebuilt from the live blocks at dump time and the trace; the job also "
        "records torch.cuda.max_memory_allocated() over the same step (peak statistics reset "
        "just before it), shown beside it. Phases come from the step's own forward/backward/"
        "optimizer ranges, which the allocator records in the snapshot. Memory by kind: "
        "parameters, optimizer state and gradients by the tensors' addresses; activations are "
        "what forward allocated, temporaries what backward or the optimizer allocated and freed."
    )


def build(results: Path, figures: Path) -> Section:
    section = Section("memory", "4. Memory")
    frame = load(results)
    if frame.empty:
        return section.add(Text("No memory results: the section produced no rows."))
    rows = measured(frame)
    if rows.empty:
        reasons = sorted(set(frame["error"].dropna().astype(str))) if "error" in frame else []
        configs = ", ".join(_label(r) for _, r in frame.iterrows())
        return section.add(
            Text(
                f"No memory snapshot was taken: {'; '.join(reasons) or 'no snapshot job ran'}. "
                f"Configured: {configs}."
            )
        )
    section.add(Text(_method_text(rows)))
    section.add(Findings(findings(frame)))
    section.add(
        Table(
            "Peak allocated memory: snapshot analysis vs the allocator",
            peak_table(frame),
            name="memory_peaks",
        )
    )
    section.add(
        Figure(
            figures / "peaks.png",
            "Peak allocated memory by context length, pass and precision.",
            data="memory_peaks",
        )
    )
    section.add(Table("Memory by kind at the peak (GiB)", kinds_table(rows), name="memory_by_kind"))
    residual = residual_table(rows)
    if not residual.empty:
        section.add(
            Table(
                "The size of one residual-stream activation (batch × context × d_model × bytes)",
                residual,
                name="memory_residual_stream",
            )
        )
    for (size, pass_name), _ in rows.groupby(["size", "pass"], observed=True):
        section.add(
            Figure(
                figures / _timeline_name(size, pass_name),
                f"Allocated memory over one {PASS_LABELS[pass_name]} of {size}, phases shaded; "
                "the dotted line is the peak.",
            )
        )
    for _, part in rows[rows["pass"] == "train_step"].groupby(["size", "precision"], observed=True):
        row = part.sort_values("context_length").iloc[-1]
        largest = largest_table(results, row)
        if not largest.empty:
            section.add(
                Table(
                    f"Largest allocations during {_label(row)}",
                    largest,
                    note="Grouped by size and source line; count is per step.",
                )
            )
    snapshots = ", ".join(f"`{results / s}`" for s in rows["snapshot"].dropna())
    section.add(
        Text(
            f"The raw snapshots are kept: open one at {MEMORY_VIZ} (drag the .pickle onto the page) "
            f"for the interactive timeline and every allocation's stack. Files: {snapshots}."
        )
    )
    return section
