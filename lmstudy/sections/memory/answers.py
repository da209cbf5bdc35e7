"""Section 4, memory: its answers to the course's questions (a) to (e)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.report.answers import Answer
from lmstudy.report.coverage import own_models
from lmstudy.report.labels import PASS_LABELS
from lmstudy.sections.memory.tables import GIB, phase_peak_table, residual_rows

Q = {
    "a": "memory_profiling (a): what do the memory timelines of a forward pass and a training step show?",
    "b": "memory_profiling (b): what is the peak memory of each context length, forward and training step?",
    "c": "memory_profiling (c): what does mixed precision change in the peak memory?",
    "d": "memory_profiling (d): how large is one residual-stream activation?",
    "e": "memory_profiling (e): which are the largest allocations of the forward pass, and what makes them?",
}


def _gib(value: float) -> str:
    return f"{value / GIB:.3g} GiB" if value >= 2**26 else f"{value / 2**20:.3g} MiB"


def _list(values) -> str:
    return " / ".join(values)


def timeline_answer(phases: pd.DataFrame) -> Answer:
    if phases.empty:
        return Answer(Q["a"], "Not answered: no timeline was recorded.")
    train = phases[phases["pass"] == PASS_LABELS["train_step"]]
    fwd = phases[phases["pass"] == PASS_LABELS["forward"]]
    if train.empty and fwd.empty:
        return Answer(Q["a"], "Not answered: no timeline was recorded.")
    text = []
    if len(fwd):
        r = fwd.iloc[-1]
        text.append(
            f"The forward pass of {r['size']} ctx {r['context']} {r['precision']} starts at "
            f"{r['at start GiB']:.3g} GiB "
            f"(the model in memory) and rises to {r['step peak GiB']:.3g} GiB while it runs."
        )
    if len(train):
        r = train.iloc[-1]
        parts = [
            f"{p} {r[f'{p} peak GiB']:.3g}"
            for p in ("forward", "backward", "optimizer")
            if pd.notna(r.get(f"{p} peak GiB"))
        ]
        text.append(
            f"A training step ({r['size']} ctx {r['context']} {r['precision']}) starts at "
            f"{r['at start GiB']:.3g} GiB "
            "(parameters, optimizer state, last step's gradients), peaks per phase at "
            f"{', '.join(parts)} GiB; "
            f"its peak is in the {r['peak in phase']} phase."
        )
    return Answer(Q["a"], " ".join(text), "memory_phase_peaks")


def peak_answer(phases: pd.DataFrame) -> Answer:
    if phases.empty:
        return Answer(Q["b"], "Not answered: no snapshot was analysed.")
    text = []
    for (size, pass_label, precision), part in phases.groupby(
        ["size", "pass", "precision"], sort=False, observed=True
    ):
        part = part.sort_values("context")
        contexts = _list(str(c) for c in part["context"])
        peaks = _list(f"{v:.3g}" for v in part["step peak GiB"])
        sentence = f"{size} {pass_label} {precision} at context {contexts}: peak {peaks} GiB"
        where = part["peak in phase"].value_counts()
        if pass_label == PASS_LABELS["train_step"] and "forward peak GiB" in part and len(where):
            # "in 1 of 1" says nothing (review W8): one context, or all of them, is just "in the phase".
            share = "" if where.iloc[0] == len(part) else f" in {where.iloc[0]} of {len(part)} contexts"
            sentence += (
                f", in the {where.index[0]} phase{share}; its forward phase alone "
                f"{_list(f'{v:.3g}' for v in part['forward peak GiB'])} GiB"
            )
        text.append(sentence)
    answer = "; ".join(text) + "."
    train = phases[phases["pass"] == PASS_LABELS["train_step"]]
    if len(train) and (train["peak in phase"] == "optimizer").any():
        answer += (
            " A training step's peak comes in the optimizer phase, where parameters, gradients, AdamW's two "
            "states and the update's parameter-sized temporaries are alive at once."
        )
        for (size, precision), part in train.groupby(["size", "precision"], sort=False, observed=True):
            part = part.sort_values("context")
            if len(part) > 1 and "forward peak GiB" in part:
                step = part["step peak GiB"].iloc[-1] / part["step peak GiB"].iloc[0]
                forward = part["forward peak GiB"].iloc[-1] / part["forward peak GiB"].iloc[0]
                answer += (
                    f" From context {part['context'].iloc[0]} to {part['context'].iloc[-1]} ({size} "
                    f"{precision}) "
                    f"the step's peak changes {step:.2f}× and its forward phase's {forward:.2f}×."
                )
                break
    if len(train) and (train["peak in phase"] == "backward").any():
        answer += (
            " A training step's peak comes early in the backward phase, while the activations forward saved "
            "are still alive and the backward's first temporaries (the logits' gradient among them) are "
            "allocated beside them."
        )
    contexts = sorted(phases["context"].unique())
    if len(contexts) == 1:
        answer += (
            f" Only context {contexts[0]} was measured in this run (memory.context_lengths in config.yaml), "
            "so how the peak changes with context is not shown here."
        )
    headline = ""
    if len(train) and "forward peak GiB" in train:
        one = "fp32" if (train["precision"] == "fp32").any() else train["precision"].iloc[0]
        r = train[train["precision"] == one].sort_values("context")
        first, last = r.iloc[0], r.iloc[-1]
        headline = (
            f"{last['size']}'s training step ({last['precision']}) peaks at "
            f"{last['step peak GiB']:.3g} GiB in the "
            f"{last['peak in phase']} phase at context {last['context']}"
            + (
                f"; its forward phase grows from {first['forward peak GiB']:.3g} GiB at context "
                f"{first['context']} "
                f"to {last['forward peak GiB']:.3g} GiB"
                if len(r) > 1
                else ""
            )
            + "."
        )
    return Answer(
        Q["b"],
        answer,
        "memory_phase_peaks",
        headline=headline,
        trust="one snapshot each; the allocator's own peak agrees, see below" if headline else "",
    )


def precision_answer(frame: pd.DataFrame) -> Answer:
    wide = frame.pivot_table(
        index=["size", "pass", "context_length"],
        columns="precision",
        values="peak_bytes",
        aggfunc="first",
        observed=True,
    )
    if not {"fp32", "bf16"} <= set(wide.columns) or wide[["fp32", "bf16"]].dropna().empty:
        return Answer(Q["c"], "Not answered: the run has no fp32 and bf16 snapshot of one configuration.")
    wide = wide.dropna(subset=["fp32", "bf16"])
    parts = []
    for pass_name, part in wide.groupby(level="pass", observed=True):
        ratio = part["bf16"] / part["fp32"]
        parts.append(
            f"{PASS_LABELS[pass_name]} {_list(f'{r:.2f}' for r in ratio)}× "
            f"(context {_list(str(c) for c in part.index.get_level_values('context_length'))})"
        )
    return Answer(
        Q["c"],
        "bf16 autocast's peak over fp32's: " + "; ".join(parts) + ". Memory by kind below says "
        "which kinds of memory change.",
        "memory_peaks",
    )


def residual_answer(frame: pd.DataFrame) -> Answer:
    rows = residual_rows(frame)
    if rows.empty:
        own = own_models(frame)
        if own:
            return Answer(Q["d"], f"Not answered: {own} is a model of your own, and the snapshot job does "
                          "not know which of its modules carries the residual stream, so it recorded no "
                          "residual-stream size.")
        return Answer(Q["d"], "Not answered: the snapshots do not record the model's width.")
    rows = rows.drop_duplicates(["size", "context_length", "residual_dtype"])
    first = rows.iloc[0]
    items = _list(
        f"{r['residual_stream_bytes'] / 2**20:.3g} MiB (ctx {int(r['context_length'])}, "
        f"{r['residual_dtype']})"
        for _, r in rows.iterrows()
    )
    return Answer(
        Q["d"],
        f"batch × context × d_model × bytes per element for {first['size']} (batch "
        f"{int(first['batch_size'])}, "
        f"d_model {int(first['d_model'])}): {items}." + _study_residual(rows),
        "memory_residual_stream",
    )


def _study_residual(rows: pd.DataFrame) -> str:
    """The same product for the sizes the full study profiles (config.yaml, preset full: the course
    asks about its 2.7B model) and this run did not: it needs no measurement, only the width."""
    from lmstudy.report.coverage import study_section

    study, sizes = study_section("memory"), study_section("sizes")
    missing = [s for s in study.get("sizes", []) if s not in set(rows["size"].astype(str)) and s in sizes]
    if not missing:
        return ""
    first = rows.iloc[0]
    per_element = first["residual_stream_bytes"] / (
        first["batch_size"] * first["context_length"] * first["d_model"])
    contexts = study.get("context_lengths", [int(first["context_length"])])
    parts = [
        f"{size} (d_model {sizes[size]['d_model']}): " + _list(
            f"{first['batch_size'] * c * sizes[size]['d_model'] * per_element / 2**20:.3g} MiB (ctx {c})"
            for c in contexts)
        for size in missing
    ]
    return (f" For the full study's {', '.join(missing)}, which this run did not profile, the same product "
            f"(batch {int(first['batch_size'])}, {first['residual_dtype']}) gives " + "; ".join(parts) + ".")


def largest_answer(results: Path, frame: pd.DataFrame) -> Answer:
    forward = frame[frame["pass"] == "forward"]
    if forward.empty:
        return Answer(Q["e"], "Not answered: no forward pass was recorded.")
    row = forward.sort_values("context_length").iloc[-1]
    if pd.isna(row.get("summary_dir")):
        return Answer(Q["e"], "Not answered: this run recorded no summary of the forward snapshot.")
    top = result_files.read_csv(results / row["summary_dir"] / "largest_allocations.csv", missing_ok=True)
    if top.empty:
        return Answer(Q["e"], "Not answered: the forward snapshot lists no allocation.")
    items = []
    for _, a in top.head(3).iterrows():
        code = a.get("code")
        source = a.get("source")
        source = source if isinstance(source, str) else "an unrecorded source"
        made = f"{code} ({source})" if isinstance(code, str) and code else source
        requested = a.get("requested_bytes")
        asked = (f" (in a {_gib(a['size_bytes'])} allocator block)"
                 if pd.notna(requested) and requested != a["size_bytes"] else "")
        items.append(f"{_gib(requested if pd.notna(requested) else a['size_bytes'])}{asked} × "
                     f"{int(a['count'])} by {made}")
    return Answer(
        Q["e"],
        f"In the forward pass of {row['size']} ctx {int(row['context_length'])} {row['precision']}: "
        + "; ".join(items)
        + ". Sizes are what each tensor requested; the caching allocator's blocks round them up, as the "
        "table beside shows.",
        f"memory_largest_{row['size']}_{int(row['context_length'])}_forward_{row['precision']}",
    )


def answers(results: Path, frame: pd.DataFrame, rows: pd.DataFrame) -> list[Answer]:
    """`frame`: memory.csv; `rows`: its rows with a snapshot analysed."""
    phases = phase_peak_table(results, rows)
    return [
        timeline_answer(phases),
        peak_answer(phases),
        precision_answer(rows),
        residual_answer(rows),
        largest_answer(results, rows),
    ]
