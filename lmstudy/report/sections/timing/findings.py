"""Section 1, end-to-end timing: the functions that compute its findings (sentences) from its tables."""

from __future__ import annotations

import json

import pandas as pd

from lmstudy.report.sections.labels import PASS_LABELS, peak_words
from lmstudy.report.sections.timing.tables import KEY, speedup_frame, steady


def _label(row) -> str:
    return f"{row['size']} ctx {row['context_length']} {PASS_LABELS[row['pass']]} {row['precision']}"


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
        # An MFU compares a step with its own precision's peak; across precisions only the rate
        # compares, so the best MFU is said per precision, and the highest rate apart.
        rated = stable.dropna(subset=["mfu"])
        parts = []
        for precision, part in rated.groupby("precision", observed=True):
            best = part.loc[part["mfu"].idxmax()]
            parts.append(
                f"{precision} {best['mfu'] * 100:.1f}% {peak_words(part.loc[[best.name]])} "
                f"({best['achieved_tflops']:.1f} TFLOP/s, {_label(best)})"
            )
        fastest = rated.loc[rated["achieved_tflops"].idxmax()]
        items.append(
            "The highest MFU, each precision over its own datasheet peak: " + "; ".join(parts) + ". "
            f"The highest achieved rate is {fastest['achieved_tflops']:.1f} TFLOP/s ({_label(fastest)})."
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
