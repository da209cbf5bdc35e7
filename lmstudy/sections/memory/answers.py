"""Section 4, memory: its answers to the course's questions (a) to (e)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.report.answers import Answer
from lmstudy.report.contract import wording
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


_say = wording(__name__)


def _not_answered(question: str, why: str) -> Answer:
    return Answer(Q[question], _say("not_answered", why=why))


def timeline_answer(phases: pd.DataFrame) -> Answer:
    if phases.empty:
        return _not_answered("a", "no timeline was recorded.")
    train = phases[phases["pass"] == PASS_LABELS["train_step"]]
    fwd = phases[phases["pass"] == PASS_LABELS["forward"]]
    if train.empty and fwd.empty:
        return _not_answered("a", "no timeline was recorded.")
    forward = step = None
    if len(fwd):
        r = fwd.iloc[-1]
        forward = {"size": r["size"], "context": r["context"], "precision": r["precision"],
                   "start": r["at start GiB"], "peak": r["step peak GiB"]}
    if len(train):
        r = train.iloc[-1]
        step = {"size": r["size"], "context": r["context"], "precision": r["precision"],
                "start": r["at start GiB"], "peak_phase": r["peak in phase"],
                "phases": [(p, r[f"{p} peak GiB"]) for p in ("forward", "backward", "optimizer")
                           if pd.notna(r.get(f"{p} peak GiB"))]}
    return Answer(Q["a"], _say("timeline", forward=forward, train=step), "memory_phase_peaks")


def peak_answer(phases: pd.DataFrame) -> Answer:
    if phases.empty:
        return _not_answered("b", "no snapshot was analysed.")
    train = phases[phases["pass"] == PASS_LABELS["train_step"]]
    contexts = sorted(phases["context"].unique())
    answer = _say(
        "peaks",
        groups=_peak_groups(phases),
        in_optimizer=bool(len(train) and (train["peak in phase"] == "optimizer").any()),
        growth=_step_growth(train),
        in_backward=bool(len(train) and (train["peak in phase"] == "backward").any()),
        only_context=contexts[0] if len(contexts) == 1 else None,
    )
    headline = ""
    if len(train) and "forward peak GiB" in train:
        one = "fp32" if (train["precision"] == "fp32").any() else train["precision"].iloc[0]
        r = train[train["precision"] == one].sort_values("context")
        headline = _say("peak_headline", first=r.iloc[0].to_dict(), last=r.iloc[-1].to_dict(),
                        grows=len(r) > 1)
    trust = _say("peak_trust") if headline else ""
    return Answer(Q["b"], answer, "memory_phase_peaks", headline=headline, trust=trust)


def _peak_groups(phases: pd.DataFrame) -> list[dict]:
    """Per size, pass and precision: its contexts and peaks; for a training step also the phase its peak
    is in (and in how many contexts, where not all) and its forward phase's peaks."""
    groups = []
    for (size, pass_label, precision), part in phases.groupby(
        ["size", "pass", "precision"], sort=False, observed=True
    ):
        part = part.sort_values("context")
        group = {"size": size, "pass_label": pass_label, "precision": precision,
                 "contexts": [str(c) for c in part["context"]], "peaks": list(part["step peak GiB"]),
                 "phase": None}
        where = part["peak in phase"].value_counts()
        if pass_label == PASS_LABELS["train_step"] and "forward peak GiB" in part and len(where):
            # "in 1 of 1" says nothing (review W8): one context, or all of them, is just "in the phase".
            group.update(phase=where.index[0], share=None if where.iloc[0] == len(part) else where.iloc[0],
                         forward=list(part["forward peak GiB"]))
        groups.append(group)
    return groups


def _step_growth(train: pd.DataFrame) -> dict | None:
    """How much the first size and precision with several contexts changes its step's peak and its
    forward phase's from the shortest context to the longest; None where none has several."""
    for (size, precision), part in train.groupby(["size", "precision"], sort=False, observed=True):
        part = part.sort_values("context")
        if len(part) > 1 and "forward peak GiB" in part:
            return {"size": size, "precision": precision, "first": part["context"].iloc[0],
                    "last": part["context"].iloc[-1],
                    "step": part["step peak GiB"].iloc[-1] / part["step peak GiB"].iloc[0],
                    "forward": part["forward peak GiB"].iloc[-1] / part["forward peak GiB"].iloc[0]}
    return None


def precision_answer(frame: pd.DataFrame) -> Answer:
    wide = frame.pivot_table(
        index=["size", "pass", "context_length"],
        columns="precision",
        values="peak_bytes",
        aggfunc="first",
        observed=True,
    )
    if not {"fp32", "bf16"} <= set(wide.columns) or wide[["fp32", "bf16"]].dropna().empty:
        return _not_answered("c", "the run has no fp32 and bf16 snapshot of one configuration.")
    wide = wide.dropna(subset=["fp32", "bf16"])
    by_pass = [
        (PASS_LABELS[pass_name], list(part["bf16"] / part["fp32"]),
         [str(c) for c in part.index.get_level_values("context_length")])
        for pass_name, part in wide.groupby(level="pass", observed=True)
    ]
    return Answer(Q["c"], _say("precision", by_pass=by_pass), "memory_peaks")


def residual_answer(frame: pd.DataFrame) -> Answer:
    rows = residual_rows(frame)
    if rows.empty:
        own = own_models(frame)
        if own:
            return Answer(Q["d"], _say("no_residual_of_own_model", own=own))
        return _not_answered("d", "the snapshots do not record the model's width.")
    rows = rows.drop_duplicates(["size", "context_length", "residual_dtype"])
    first = rows.iloc[0]
    items = [(r["residual_stream_bytes"] / 2**20, int(r["context_length"]), r["residual_dtype"])
             for _, r in rows.iterrows()]
    text = _say("residual", size=first["size"], batch=int(first["batch_size"]), d_model=int(first["d_model"]),
                items=items, study=_study_residual(rows), dtype=first["residual_dtype"])
    return Answer(Q["d"], text, "memory_residual_stream")


def _study_residual(rows: pd.DataFrame) -> list[tuple]:
    """The same product for the sizes the full study profiles (config.yaml, preset full: the course
    asks about its 2.7B model) and this run did not: it needs no measurement, only the width. Each
    size as (name, d_model, [(MiB, context)])."""
    from lmstudy.report.coverage import study_section

    study, sizes = study_section("memory"), study_section("sizes")
    missing = [s for s in study.get("sizes", []) if s not in set(rows["size"].astype(str)) and s in sizes]
    first = rows.iloc[0]
    per_element = first["residual_stream_bytes"] / (
        first["batch_size"] * first["context_length"] * first["d_model"])
    contexts = study.get("context_lengths", [int(first["context_length"])])
    return [
        (size, sizes[size]["d_model"],
         [(first["batch_size"] * c * sizes[size]["d_model"] * per_element / 2**20, c) for c in contexts])
        for size in missing
    ]


def largest_answer(results: Path, frame: pd.DataFrame) -> Answer:
    forward = frame[frame["pass"] == "forward"]
    if forward.empty:
        return _not_answered("e", "no forward pass was recorded.")
    row = forward.sort_values("context_length").iloc[-1]
    if pd.isna(row.get("summary_dir")):
        return _not_answered("e", "this run recorded no summary of the forward snapshot.")
    top = result_files.read_csv(results / row["summary_dir"] / "largest_allocations.csv", missing_ok=True)
    if top.empty:
        return _not_answered("e", "the forward snapshot lists no allocation.")
    items = []
    for _, a in top.head(3).iterrows():
        code = a.get("code")
        source = a.get("source")
        source = source if isinstance(source, str) else "an unrecorded source"
        made = f"{code} ({source})" if isinstance(code, str) and code else source
        requested = a.get("requested_bytes")
        block = _gib(a["size_bytes"]) if pd.notna(requested) and requested != a["size_bytes"] else ""
        asked = _gib(requested if pd.notna(requested) else a["size_bytes"])
        items.append((asked, block, int(a["count"]), made))
    text = _say("largest", size=row["size"], context=int(row["context_length"]), precision=row["precision"],
                items=items)
    return Answer(Q["e"], text,
                  f"memory_largest_{row['size']}_{int(row['context_length'])}_forward_{row['precision']}")


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
