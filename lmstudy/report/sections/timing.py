"""Section 1, end-to-end timing: tables, figures and findings."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.analyse.computed import computes_table  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS, order_sizes  # noqa: E402

KEY = ["size", "context_length", "pass", "precision", "variant"]


def load(results: Path) -> pd.DataFrame:
    path = results / "timing" / "timing.csv"
    frame = result_files.read_csv(path, missing_ok=True)
    if frame.empty:
        return frame
    order_sizes(frame)
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(PASS_LABELS), ordered=True)
    return frame


def study_model(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the study's model (naive attention, eager); the other variants
    (timing.variants beyond naive) have a table of their own (`variants_table`)."""
    return frame[frame["variant"] == "naive"] if "variant" in frame else frame


@computes_table
def variants_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The variants beyond naive (sdpa, -compile) at steady state, beside the naive model's median in the
    same configuration: timing.variants lists them; the optimization ladder is section 7's."""
    if "variant" not in frame:
        return pd.DataFrame()
    rows = steady(frame)
    others = rows[rows["variant"] != "naive"]
    if others.empty:
        return pd.DataFrame()
    key = ["size", "context_length", "pass", "precision"]
    naive = rows[(rows["variant"] == "naive") & (rows["status"] == "ok")].set_index(key)["median_ms"]
    naive_ms = naive.reindex(pd.MultiIndex.from_frame(others[key])).to_numpy()
    median = others["median_ms"].where(others["status"] == "ok")
    table = pd.DataFrame(
        {
            "size": others["size"].astype(str),
            "context": others["context_length"],
            "pass": others["pass"].astype(str).map(PASS_LABELS),
            "precision": others["precision"],
            "variant": others["variant"],
            "median ms": _ms_or_status(others, "median_ms"),
            "naive median ms": naive_ms,
            "speed-up vs naive ×": naive_ms / median.to_numpy(),
        }
    )
    return table.reset_index(drop=True)


def steady(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows at the largest warm-up measured: the steady-state numbers."""
    return frame[frame["warmup_steps"] == frame["warmup_steps"].max()]


def _label(row) -> str:
    return f"{row['size']} ctx {row['context_length']} {PASS_LABELS[row['pass']]} {row['precision']}"


def _ms_or_status(frame: pd.DataFrame, column: str) -> pd.Series:
    shown = frame[column].astype(object)
    return shown.where(frame["status"] == "ok", frame["status"])


@computes_table
def main_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = steady(frame).copy()
    rows["median ms"] = _ms_or_status(rows, "median_ms")
    rows["std ms"] = rows["std_ms"]
    rows["tokens/s"] = rows["tokens_per_s"]
    rows["TFLOP/s"] = rows["achieved_tflops"]
    rows["MFU %"] = rows["mfu"] * 100
    rows["peak GiB"] = rows["peak_allocated_bytes"] / 2**30
    values = ["median ms", "std ms", "tokens/s", "TFLOP/s", "MFU %", "peak GiB"]
    table = rows.pivot_table(
        index=["size", "context_length", "pass"], columns="precision", values=values,
        aggfunc="first", observed=True, dropna=False,
    )
    table = table.dropna(how="all")
    table.columns = [f"{precision} {value}" for value, precision in table.columns]
    ordered = [f"{p} {v}" for p in ("fp32", "bf16") for v in values if f"{p} {v}" in table]
    # A column with nothing in it (MFU and peak memory on a CPU) is left out, not shown as n/a.
    ordered = [c for c in ordered if table[c].notna().any()]
    table = table[ordered].reset_index()
    table["pass"] = table["pass"].map(PASS_LABELS)
    return table.rename(columns={"context_length": "context"})


@computes_table
def warmup_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame.copy()
    rows["cell"] = [
        f"{m:.2f} ± {s:.2f} (CV {c:.2f})" if st == "ok" else st
        for m, s, c, st in zip(rows["mean_ms"], rows["std_ms"], rows["cv"], rows["status"], strict=True)
    ]
    index = ["size", "context_length", "pass", "precision"]
    table = rows.pivot_table(
        index=index, columns="warmup_steps", values="cell", aggfunc="first", observed=True,
    )
    table.columns = [f"warm-up {w}: mean ± std ms" for w in table.columns]
    if "first_step_ms" in rows:
        # The fresh process's first step: the cold start's cost in one number.
        first = rows.groupby(index, observed=True)["first_step_ms"].first()
        table.insert(0, "first step ms", first.reindex(table.index))
    table = table.reset_index()
    table["pass"] = table["pass"].map(PASS_LABELS)
    return table.rename(columns={"context_length": "context"})


def speedup_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """bf16 over fp32 speed-up of the steady median, per configuration."""
    rows = steady(frame)
    rows = rows[rows["status"] == "ok"]
    wide = rows.pivot_table(
        index=["size", "context_length", "pass", "variant"], columns="precision",
        values="median_ms", aggfunc="first", observed=True,
    )
    if not {"fp32", "bf16"} <= set(wide.columns):
        return pd.DataFrame()
    wide = wide.dropna(subset=["fp32", "bf16"])
    wide["speedup"] = wide["fp32"] / wide["bf16"]
    return wide.reset_index()


@computes_table
def speedup_table(speedups: pd.DataFrame) -> pd.DataFrame:
    table = speedups.pivot_table(
        index=["size", "context_length"], columns="pass", values="speedup",
        aggfunc="first", observed=True,
    )
    table.columns = [f"{PASS_LABELS[p]} ×" for p in table.columns]
    return table.reset_index().rename(columns={"context_length": "context"})


@computes_table
def mfu_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = steady(frame)
    rows = rows[rows["pass"] == "train_step"].copy()
    rows["MFU %"] = (rows["mfu"] * 100).astype(object).where(rows["status"] == "ok", rows["status"])
    table = rows.pivot_table(
        index=["size", "precision"], columns="context_length", values="MFU %",
        aggfunc="first", observed=True,
    )
    table.columns = [f"ctx {c}" for c in table.columns]
    return table.reset_index()


def _plot_by_pass(frame, y, ylabel, out: Path, logy=True, missing=None, ratio=False):
    """One panel per pass, a line per size and precision over context length; `missing`
    (rows with a status other than ok) marked where their points would be."""
    passes = [p for p in PASS_LABELS if p in set(frame["pass"])]
    fig, axes = plots.subplots(1, len(passes), figsize=(3.6 * len(passes) + 1.6, 3.4))
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = frame[frame["pass"] == pass_name]
        colors = {}
        for (size, precision), line in part.groupby(["size", "precision"], observed=True):
            line = line.sort_values("context_length")
            style = "-" if precision == "fp32" else "--"
            drawn = ax.plot(line["context_length"], line[y], style, marker="o", label=f"{size} {precision}")
            colors[(size, precision)] = drawn[0].get_color()
        contexts = set(part["context_length"])
        if missing is not None:
            contexts |= set(missing[missing["pass"] == pass_name]["context_length"])
        plots.power_of_two_ticks(ax, contexts)
        if ratio:
            plots.reference_line(ax)
        if logy:
            plots.plain_log(ax, "y")
        if missing is not None:
            gone = missing[missing["pass"] == pass_name]
            if len(gone):
                top = plots.room_above(ax, log=logy)
                for (context, status), rows in gone.groupby(["context_length", "status"]):
                    sizes = ", ".join(dict.fromkeys(str(s) for s in rows["size"]))
                    plots.mark_missing(ax, context, top, f"{sizes}: {status}")
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_xlabel("context length")
        ax.set_ylabel(ylabel)
    plots.legend_outside(fig, axes)
    fig.savefig(out)
    plt.close(fig)


def make_figures(results: Path, out_dir: Path) -> None:
    frame = study_model(load(results))
    out_dir.mkdir(parents=True, exist_ok=True)
    if frame.empty:
        return
    ok = frame[frame["status"] == "ok"]
    failed = steady(frame)[steady(frame)["status"] != "ok"]
    if not ok.empty:
        latency = out_dir / "latency.png"
        _plot_by_pass(steady(ok), "median_ms", "median step time (ms)", latency, missing=failed)

        fig, axes = plots.subplots(1, 2, figsize=(9, 3.4))
        steady_mean = steady(ok).set_index(KEY)["mean_ms"]
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
        fig.suptitle("Warm-up effect (one point per configuration)")
        fig.savefig(out_dir / "warmup.png")
        plt.close(fig)

    speedups = speedup_frame(frame)
    if not speedups.empty:
        speedups["precision"] = "bf16"
        ylabel = "bf16 speed-up over fp32 (×)"
        _plot_by_pass(speedups, "speedup", ylabel, out_dir / "speedup.png", logy=False, ratio=True)


def findings(frame: pd.DataFrame) -> list[str]:
    items = []
    ok = frame[frame["status"] == "ok"]
    stable = steady(ok)
    oom = steady(frame)[steady(frame)["status"] == "OOM"]
    for size, part in oom.groupby("size", observed=True):
        contexts = ", ".join(str(c) for c in sorted(part["context_length"].unique()))
        passes = ", ".join(PASS_LABELS[p] for p in part["pass"].unique())
        precisions = ", ".join(sorted(part["precision"].unique()))
        items.append(
            f"{size} ran out of memory in {len(part)} configuration(s): context {contexts}; "
            f"{passes}; {precisions}."
        )
    if stable["mfu"].notna().any():
        best = stable.loc[stable["mfu"].idxmax()]
        items.append(
            f"The highest MFU is {best['mfu'] * 100:.1f}% ({best['achieved_tflops']:.1f} TFLOP/s) "
            f"for {_label(best)}."
        )
    speedups = speedup_frame(frame)
    for pass_name, part in speedups.groupby("pass", observed=True):
        lo, hi = part.loc[part["speedup"].idxmin()], part.loc[part["speedup"].idxmax()]
        median = part["speedup"].median()
        verdict = f"{median:.2f}× as fast as" if median >= 1 else f"{1 / median:.2f}× slower than"
        items.append(
            f"{PASS_LABELS[pass_name].capitalize()}: bf16 autocast is a median {verdict} fp32 "
            f"(speed-up {lo['speedup']:.2f}× for {lo['size']} ctx {lo['context_length']} to "
            f"{hi['speedup']:.2f}× for {hi['size']} ctx {hi['context_length']})."
        )
    if len(speedups) >= 3:
        work = frame.groupby(["size", "context_length", "pass"], observed=True)["flops_per_step"].first()
        with_work = speedups.join(work, on=["size", "context_length", "pass"])
        rho = with_work["speedup"].rank().corr(with_work["flops_per_step"].rank())
        slower = with_work[with_work["speedup"] < 1]
        text = (
            f"The bf16 speed-up {'rises' if rho > 0 else 'falls'} with the work per step "
            f"(rank correlation {rho:.2f} between speed-up and FLOPs per step)"
        )
        if len(slower):
            text += (
                f"; bf16 is slower in {len(slower)} of {len(with_work)} configurations, all at or below "
                f"{slower['flops_per_step'].max() / 1e9:.3g} GFLOP per step, where the casts autocast "
                "inserts are not repaid by faster matrix products"
                if slower["flops_per_step"].max() <= with_work["flops_per_step"].median()
                else f"; bf16 is slower in {len(slower)} of {len(with_work)} configurations"
            )
        items.append(text + ".")
    if (ok["warmup_steps"] == 0).any() and ok["warmup_steps"].max() > 0:
        cold = ok[ok["warmup_steps"] == 0].set_index(KEY)
        warm = stable.set_index(KEY)
        both = cold.merge(warm, left_index=True, right_index=True, suffixes=("_cold", "_warm"), how="inner")
        if len(both):
            first = both["step_times_ms_cold"].map(lambda s: json.loads(s)[0])
            ratio = first / both["median_ms_warm"]
            inflation = both["mean_ms_cold"] / both["mean_ms_warm"] - 1
            items.append(
                f"Without warm-up the first step takes {ratio.median():.1f}× the steady median "
                f"(median over {len(both)} configurations, up to {ratio.max():.0f}×), which inflates "
                f"the mean of {int(both['timed_steps_cold'].iloc[0])} timed steps by "
                f"{inflation.median() * 100:.0f}% and raises the CV from "
                f"{both['cv_warm'].median():.3f} to {both['cv_cold'].median():.2f}."
            )
    warmups = sorted(ok["warmup_steps"].unique())
    if len(warmups) >= 3:
        one, top = warmups[1], warmups[-1]
        a = ok[ok["warmup_steps"] == one].set_index(KEY)["median_ms"]
        b = ok[ok["warmup_steps"] == top].set_index(KEY)["median_ms"]
        change = (a / b.reindex(a.index) - 1).abs().dropna()
        if len(change):
            # A change within the steps' own spread is noise, not a warm-up effect.
            noise = ok[ok["warmup_steps"] == top]["cv"].median()
            settled = change.median() <= max(0.05, 2 * noise)
            verdict = (
                f"{one} warm-up step{'s are' if one > 1 else ' is'} enough"
                if settled
                else f"{one} warm-up step{'s are' if one > 1 else ' is'} not enough"
            )
            items.append(
                f"Between {one} and {top} warm-up steps the median moves by a median "
                f"{change.median() * 100:.1f}% (at most {change.max() * 100:.1f}%), against a "
                f"step-to-step CV of {noise * 100:.1f}% at {top} warm-ups: {verdict}."
            )
    for (size, pass_name), part in stable.groupby(["size", "pass"], observed=True):
        part = part[part["precision"] == part["precision"].iloc[0]].sort_values("context_length")
        if len(part) >= 2 and pass_name == "train_step":
            lo, hi = part.iloc[0], part.iloc[-1]
            items.append(
                f"{size}, training step ({lo['precision']}): from context {lo['context_length']} to "
                f"{hi['context_length']} ({hi['context_length'] / lo['context_length']:.0f}× the tokens) "
                f"the step takes {hi['median_ms'] / lo['median_ms']:.1f}× as long."
            )
    fb = stable.pivot_table(index=["size", "context_length", "precision"], columns="pass",
                            values="median_ms", observed=True)
    if {"forward", "forward_backward"} <= set(fb.columns):
        ratio = ((fb["forward_backward"] - fb["forward"]) / fb["forward"]).dropna()
        if len(ratio):
            items.append(
                f"The backward pass (forward+backward minus inference forward) takes a median "
                f"{ratio.median():.1f}× the forward time (range {ratio.min():.1f}× to {ratio.max():.1f}×)."
            )
    return items


def build(results: Path, figures: Path) -> Section:
    section = Section("timing", "1. End-to-end timing")
    every_variant = load(results)
    frame = study_model(every_variant)
    if frame.empty:
        return section.add(Text("No timing results: the section is switched off or produced no rows."))
    top = int(frame["warmup_steps"].max())
    section.add(Text(
        f"Each pass of each configuration ran in one fresh process that timed all its "
        f"{top + int(frame['timed_steps'].iloc[0])} steps, synchronizing the device after each, with "
        f"batch {int(frame['batch_size'].iloc[0])}. Warm-up w's row is the window of "
        f"{int(frame['timed_steps'].iloc[0])} steps after the first w: what a fresh process with w "
        f"warm-up steps times. Warm-up 0 is the cold start (CUDA initialisation, model build, first "
        f"steps; not the interpreter's start or the imports). Steady-state numbers use {top} warm-up "
        "steps. MFU counts "
        "6N + 12·L·H·Q·T FLOPs per token for a training step (a third for the forward pass) "
        "over the GPU's datasheet dense peak for the precision; it is n/a for unknown GPUs and CPUs."
    ))
    section.add(Findings(findings(frame)))
    section.add(
        Table(
            f"Step time by size, context and pass (warm-up {top})",
            main_table(frame),
            name="timing_step_time",
        )
    )
    section.add(
        Figure(
            figures / "latency.png", "Median step time vs context length, per pass.", data="timing_step_time"
        )
    )
    section.add(
        Table(
            "Warm-up effect: mean ± std per warm-up count",
            warmup_table(frame),
            name="timing_warmup",
        )
    )
    section.add(
        Figure(
            figures / "warmup.png",
            "Mean step time relative to steady state, and CV, by warm-up.",
            data="timing_warmup",
        )
    )
    speedups = speedup_frame(frame)
    if not speedups.empty:
        caption = "bf16 autocast speed-up over fp32 (fp32 time / bf16 time)"
        section.add(Table(caption, speedup_table(speedups), name="timing_bf16_speedup"))
        section.add(
            Figure(
                figures / "speedup.png",
                "bf16 speed-up over fp32 vs context length.",
                data="timing_bf16_speedup",
            )
        )
    if plots.has_values(frame.get("mfu")):
        section.add(
            Table(
                "Model FLOPs utilization of the training step (%)",
                mfu_table(frame),
                name="timing_mfu",
            )
        )
    else:
        gpus = ", ".join(sorted({str(g) for g in frame.get("gpu", pd.Series(dtype=str)).dropna()})) or "n/a"
        section.add(Text(
            f"No MFU: it needs the datasheet peak of a known GPU (lmstudy/hardware.py), and this run "
            f"measured on {gpus}."
        ))
    variants = variants_table(every_variant)
    if not variants.empty:
        section.add(
            Table(
                f"Other variants (timing.variants): steady-state median (warm-up {top}) beside the naive "
                "model's",
                variants,
                name="timing_other_variants",
            )
        )
    return section
