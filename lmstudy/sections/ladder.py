"""The optimization ladder of the training step, from the timing section's rows.

fp32 -> bf16 autocast -> bf16 + SDPA -> bf16 + SDPA + torch.compile, per size
and context length: each rung's steady median, its speed-up over fp32 and
over the rung below, achieved TFLOP/s and MFU. MFU here is over the GPU's
dense bf16 peak for every rung, so that the rungs compare on one scale.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy import hardware, result_files  # noqa: E402
from lmstudy.computed import computes_table  # noqa: E402
from lmstudy.report import Figure, Findings, Section, Table, Text  # noqa: E402
from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.labels import faster, order_sizes, size_order  # noqa: E402

# (rung, precision, timing variant)
RUNGS = (
    ("fp32", "fp32", "naive"),
    ("bf16", "bf16", "naive"),
    ("bf16 + SDPA", "bf16", "sdpa"),
    ("bf16 + SDPA + compile", "bf16", "sdpa-compile"),
)


def load(results: Path) -> pd.DataFrame:
    path = results / "timing" / "timing.csv"
    frame = result_files.read_csv(path, missing_ok=True)
    if frame.empty:
        return frame
    frame = frame[frame["pass"] == "train_step"]
    if "variant" not in frame:
        frame = frame.assign(variant="naive")
    return frame


def ladder_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per size x context x rung measured (steady state: the largest warm-up)."""
    if frame.empty:
        return pd.DataFrame()
    steady = frame[frame["warmup_steps"] == frame["warmup_steps"].max()]
    rows = []
    for rung_index, (rung, precision, variant) in enumerate(RUNGS):
        part = steady[(steady["precision"] == precision) & (steady["variant"] == variant)]
        for _, row in part.iterrows():
            ok = row["status"] == "ok"
            peak = hardware.peak_tflops(str(row.get("gpu", "")), "bf16", False)
            rows.append(
                {
                    "size": row["size"],
                    "params": row.get("params"),
                    "context_length": row["context_length"],
                    "rung_index": rung_index,
                    "rung": rung,
                    "status": row["status"],
                    "median_ms": row["median_ms"] if ok else None,
                    "achieved_tflops": row["achieved_tflops"] if ok else None,
                    "mfu_bf16": row["achieved_tflops"] / peak if ok and peak else None,
                }
            )
    ladder = pd.DataFrame(rows)
    if ladder.empty:
        return ladder
    ladder = order_sizes(ladder).sort_values(["size", "context_length", "rung_index"], kind="stable")
    base = ladder[ladder["rung_index"] == 0].set_index(["size", "context_length"])["median_ms"]
    keys = list(zip(ladder["size"], ladder["context_length"], strict=True))
    ladder["speedup_vs_fp32"] = base.reindex(keys).to_numpy() / ladder["median_ms"]
    ladder["speedup_vs_previous"] = (
        ladder.groupby(["size", "context_length"], sort=False)["median_ms"].shift(1) / ladder["median_ms"]
    )
    return ladder.reset_index(drop=True)


@computes_table
def ladder_table(ladder: pd.DataFrame, context: int) -> pd.DataFrame:
    part = ladder[ladder["context_length"] == context]
    table = pd.DataFrame(
        {
            "size": part["size"],
            "rung": part["rung"],
            "median ms": part["median_ms"].astype(object).where(part["status"] == "ok", part["status"]),
            "speed-up vs fp32 ×": part["speedup_vs_fp32"],
            "speed-up vs rung below ×": part["speedup_vs_previous"],
            "TFLOP/s": part["achieved_tflops"],
            "MFU (% of bf16 peak)": part["mfu_bf16"] * 100,
        }
    ).reset_index(drop=True)
    return _without_empty_mfu(table)


def _without_empty_mfu(table: pd.DataFrame) -> pd.DataFrame:
    """No MFU column where no GPU peak is known (a CPU run): a column of n/a says nothing."""
    column = "MFU (% of bf16 peak)"
    return table if plots.has_values(table[column]) else table.drop(columns=column)


@computes_table
def best_table(ladder: pd.DataFrame) -> pd.DataFrame:
    ok = ladder.dropna(subset=["median_ms"])
    best = ok.loc[ok.groupby(["size", "context_length"], sort=False)["median_ms"].idxmin()]
    table = pd.DataFrame(
        {
            "size": best["size"],
            "context": best["context_length"],
            "fastest rung": best["rung"],
            "median ms": best["median_ms"],
            "speed-up vs fp32 ×": best["speedup_vs_fp32"],
            "MFU (% of bf16 peak)": best["mfu_bf16"] * 100,
        }
    ).reset_index(drop=True)
    return _without_empty_mfu(table)


def _context(ladder: pd.DataFrame) -> int:
    """The longest context with more than one rung measured."""
    counts = ladder.groupby("context_length")["rung"].nunique()
    many = counts[counts > 1]
    return int((many if len(many) else counts).index.max())


def findings(ladder: pd.DataFrame) -> list[str]:
    items = []
    missing = [r for r, _, _ in RUNGS if r not in set(ladder["rung"])]
    if missing:
        items.append(
            f"Not measured: {', '.join(missing)} (list sdpa and sdpa-compile in timing.variants and "
            "both precisions in timing.precisions for the whole ladder)."
        )
    context = _context(ladder)
    part = ladder[ladder["context_length"] == context]
    for size, rungs in part.groupby("size", sort=False):
        ok = rungs.dropna(subset=["median_ms"])
        oom = rungs[rungs["status"] != "ok"]
        if ok.empty:
            continue
        best = ok.loc[ok["median_ms"].idxmin()]
        text = f"{size} at context {context}: the fastest rung is {best['rung']}"
        if pd.notna(best["speedup_vs_fp32"]) and best["rung_index"] > 0:
            text += f", {best['speedup_vs_fp32']:.2f}× faster than fp32"
        if pd.notna(best["mfu_bf16"]):
            text += f", at {best['mfu_bf16'] * 100:.1f}% MFU ({best['achieved_tflops']:.0f} TFLOP/s)"
        if len(oom):
            text += f"; out of memory: {', '.join(oom['rung'])}"
        items.append(text + ".")
    steps = ladder.dropna(subset=["speedup_vs_previous"])
    if len(steps):
        by_rung = steps.groupby("rung", sort=False)["speedup_vs_previous"].median()
        text = (
            "Each rung against the one below it (median over all sizes and contexts): "
            + ", ".join(f"{rung} {faster(ratio)}" for rung, ratio in by_rung.items())
        )
        if (by_rung > 1).any():
            text += f"; the biggest speed-up is {by_rung.idxmax()}"
        else:
            text += "; no rung is faster than the one below it"
        items.append(text + ".")
    return items


def make_figures(results: Path, out_dir: Path) -> None:
    """Bars per rung and size at the ladder's context: speed-up over fp32, and MFU where the
    GPU's peak is known (no MFU panel on a CPU or an unknown GPU); a rung not measured or out
    of memory is marked where its bar would be."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ladder = ladder_frame(load(results))
    if ladder.empty:
        return
    context = _context(ladder)
    part = ladder[ladder["context_length"] == context]
    sizes = size_order(part["size"])
    panels = [("speedup_vs_fp32", "speed-up over fp32 (×)", 1.0)]
    if plots.has_values(part["mfu_bf16"]):
        panels.append(("mfu_bf16", "MFU, % of dense bf16 peak", 100.0))
    fig, axes = plots.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1.8, 3.6))
    width = 0.8 / len(RUNGS)
    for ax, (column, ylabel, scale) in zip(axes[0], panels, strict=True):
        if column == "speedup_vs_fp32":
            plots.reference_line(ax, label="fp32 (1.0×)")
        missing = []
        for i, (rung, _, _) in enumerate(RUNGS):
            g = part[part["rung"] == rung].set_index("size").reindex(sizes)
            x = [j + i * width for j in range(len(sizes))]
            values = g[column] * scale
            bars = ax.bar(x, values.fillna(0), width, label=rung)
            for xi, value, status in zip(x, values, g["status"], strict=True):
                if value != value:
                    missing.append((xi, "not measured" if status != status else str(status), bars[0]))
        ax.set_xticks([j + width * (len(RUNGS) - 1) / 2 for j in range(len(sizes))], sizes)
        ax.set_ylabel(ylabel)
        if missing:
            low, high = ax.get_ylim()
            for xi, status, bar in missing:
                plots.mark_missing(ax, xi, low + 0.04 * (high - low), status, bar.get_facecolor())
    plots.legend_outside(fig, axes, title="rung")
    fig.suptitle(f"Training step ladder at context {context}")
    fig.savefig(out_dir / "ladder.png")
    plt.close(fig)


def build(results: Path, figures: Path) -> Section:
    section = Section("ladder", "6b. The optimization ladder of the training step")
    ladder = ladder_frame(load(results))
    if ladder.empty:
        return section.add(Text("No training-step timing rows: the ladder needs the timing section."))
    context = _context(ladder)
    section.add(
        Text(
            "Training step (forward, backward, AdamW), from the timing section's steady-state medians: "
            "fp32 -> bf16 autocast -> bf16 + PyTorch SDPA -> bf16 + SDPA + torch.compile. MFU is over the "
            "GPU's dense bf16 peak for every rung, so the rungs share one scale. Rungs beyond these "
            "(fused and compiled AdamW, CUDA graphs), each step's GPU time by kernel category, and the "
            "share of this GPU's measured matmul rate come from scripts/bench_ladder.py (README: the "
            "ladder benchmark)."
        )
    )
    section.add(Findings(findings(ladder)))
    section.add(Table(f"The ladder at context {context}", ladder_table(ladder, context), name="ladder_rungs"))
    if (figures / "ladder.png").exists():
        section.add(
            Figure(
                figures / "ladder.png",
                f"Speed-up and MFU per rung at context {context}.",
                data="ladder_rungs",
            )
        )
    section.add(Table("Fastest rung per size and context", best_table(ladder), name="ladder_best"))
    return section
