"""Section 4, memory: peaks, memory by kind, timelines and largest allocations.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.memory.kinds import KINDS
from lmstudy.report.answers import percent
from lmstudy.report.sections.labels import PASS_LABELS
from lmstudy.report.sections.memory.tables import GIB, KIND_LABELS, _label, measured


def findings(frame: pd.DataFrame) -> list[str]:
    items = []
    rows = measured(frame)
    ok = rows[rows["status"] == "ok"]
    agree = rows[rows["peak_vs_allocator"].notna()] if "peak_vs_allocator" in rows else rows.iloc[0:0]
    if len(agree):
        worst = agree.loc[agree["peak_vs_allocator"].abs().idxmax()]
        items.append(
            f"The snapshot's peak equals torch.cuda.max_memory_allocated() to the byte in all {len(agree)} "
            "snapshots."
            if worst["peak_vs_allocator"] == 0
            else f"The snapshot's peak agrees with torch.cuda.max_memory_allocated() within "
            f"{percent(worst['peak_vs_allocator'])} in all {len(agree)} snapshots "
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
                from lmstudy.report.answers import span

                spread = span(ratio.min(), ratio.max())
                items.append(
                    f"{PASS_LABELS[pass_name].capitalize()}: bf16 autocast {verb} a median "
                    f"{median:.2f}× the fp32 peak"
                    + (f" (range {spread}×)" if "–" in spread else f" ({len(ratio)} configuration"
                       f"{'s' if len(ratio) > 1 else ''})")
                    + "."
                )
    for (size, pass_name, precision), part in ok.groupby(["size", "pass", "precision"], observed=True):
        part = part.sort_values("context_length")
        if len(part) >= 2:
            lo, hi = part.iloc[0], part.iloc[-1]
            first, last = f"{lo['peak_bytes'] / GIB:.2f}", f"{hi['peak_bytes'] / GIB:.2f}"
            where = (
                f"{size} {PASS_LABELS[pass_name]} {precision}: from context {lo['context_length']} to "
                f"{hi['context_length']} the peak"
            )
            if first == last:  # a range of one value is said once
                items.append(f"{where} stays at {first} GiB.")
                continue
            change = (hi["peak_bytes"] - lo["peak_bytes"]) / GIB
            verb = "grows" if change > 0 else "shrinks"
            items.append(f"{where} {verb} from {first} to {last} GiB ({change:+.2f} GiB).")
    items += _kind_findings(ok)
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
                f"{span(ratio.min(), ratio.max(), '.0f', '×')} one residual-stream activation "
                f"(batch × context × d_model × bytes)."
            )
    return items


def _bytes(rows: pd.DataFrame, kind: str) -> pd.Series:
    column = f"{kind}_bytes"
    if column not in rows:
        return pd.Series(float("nan"), rows.index)
    return pd.to_numeric(rows[column], errors="coerce")


def _kind_findings(ok: pd.DataFrame) -> list[str]:
    """Autocast's weight copies against the activations, AdamW's state against the parameters, the
    forward-phase peak against context, and the optimizer phase's temporaries."""
    from lmstudy.report.answers import span

    items = []
    cache = _bytes(ok, "autocast_cache")
    with_cache = ok[cache > 0]
    if len(with_cache):
        kept = cache[cache > 0] / GIB
        items.append(
            f"bf16 autocast keeps {span(kept.min(), kept.max(), unit=' GiB')} "
            f"of bf16 weight copies at the peak ({len(with_cache)} snapshots), "
            f"{(cache / _bytes(ok, 'parameters'))[cache > 0].median():.2f}× the fp32 parameters' bytes "
            "(2 bytes per matmul weight, the embedding excepted): constant in the context length, and "
            "not activations."
        )
    key = ["size", "context_length", "pass"]
    wide = ok.assign(act=_bytes(ok, "activations")).pivot_table(
        index=key, columns="precision", values="act", observed=True
    )
    if {"fp32", "bf16"} <= set(wide.columns) and len(with_cache):
        ratio = (wide["bf16"] / wide["fp32"]).replace([float("inf")], float("nan")).dropna()
        if len(ratio):
            items.append(
                f"Without those copies, bf16's activations at the peak are "
                f"{span(ratio.min(), ratio.max(), unit='×')} fp32's (median {ratio.median():.2f}×, "
                f"{len(ratio)} configurations)."
            )
    state = _bytes(ok, "optimizer_state")
    train = ok[state > 0]
    if len(train):
        ratio = state[state > 0] / _bytes(ok, "parameters")[state > 0]
        items.append(
            f"Optimizer state at the peak is {span(ratio.min(), ratio.max(), unit='×')} the parameters' "
            f"bytes ({span(state[state > 0].min() / GIB, state[state > 0].max() / GIB, unit=' GiB')}): "
            "AdamW's exp_avg and exp_avg_sq, one fp32 value each per parameter."
        )
    steps = ok[(ok["pass"] == "train_step")]
    if "forward_phase_peak_bytes" in steps:
        for (size, precision), part in steps.groupby(["size", "precision"], observed=True):
            part = part.sort_values("context_length").dropna(subset=["forward_phase_peak_bytes"])
            if len(part) < 2:
                continue
            lo, hi = part.iloc[0], part.iloc[-1]
            first, last = f"{lo['peak_bytes'] / GIB:.2f}", f"{hi['peak_bytes'] / GIB:.2f}"
            step = f"stays at {first} GiB" if first == last else f"goes from {first} to {last} GiB"
            items.append(
                f"{size} training step {precision}: the forward phase peaks at "
                f"{lo['forward_phase_peak_bytes'] / GIB:.2f} GiB at context {lo['context_length']} and "
                f"{hi['forward_phase_peak_bytes'] / GIB:.2f} GiB at {hi['context_length']}, while the step's "
                f"peak ({', '.join(sorted(set(part['peak_phase'].astype(str))))} phase) {step}."
            )
    in_optimizer = steps[steps["peak_phase"] == "optimizer"] if "peak_phase" in steps else steps.iloc[0:0]
    if len(in_optimizer):
        share = _bytes(in_optimizer, "temporaries") / _bytes(in_optimizer, "parameters")
        items.append(
            f"Where the training step peaks in the optimizer phase ({len(in_optimizer)} snapshots), "
            f"temporaries of {span(share.min(), share.max(), unit='×')} the parameters' bytes sit on top of "
            "parameters, gradients and AdamW's state: the foreach AdamW update's intermediate results "
            "(lists of parameter-sized tensors, e.g. the square root of exp_avg_sq)."
        )
    return items
