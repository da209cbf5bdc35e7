"""Section 6, the whole model under torch.compile: the answer to the course's question (b)."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import Answer, count, span
from lmstudy.report.labels import PASS_LABELS

QUESTION = (
    "torch_compile (b): how much faster is the compiled model, forward and training step, and at what cost?"
)


def _across(story: pd.DataFrame | None, row) -> pd.Series | None:
    """The row of compile.across.story for this comparison row's configuration, if several sections
    measured its eager step."""
    if story is None or story.empty:
        return None
    match = story[(story["size"].astype(str) == str(row["size"])) & (story["precision"] == row["precision"])
                  & (story["attention"] == row["attention"]) & (story["pass"] == row["pass"])]
    return match.iloc[0] if len(match) else None


def covering(cell: pd.Series) -> str:
    """The interval that covers every eager measurement's against the compiled one, as text."""
    return span(cell["covering_low"], cell["covering_high"], ".3g")


def _story_words(cell: pd.Series, sections: str) -> str:
    """The speed-up against every eager measurement of the configuration, and how far those agree."""
    agree = (f"which disagree beyond their intervals, by up to {(cell['max_over_min'] - 1) * 100:.0f}%"
             if cell["disagree"] else "which agree within their intervals")
    if cell["covering_low"] <= 1 <= cell["covering_high"]:
        return (f"is not told apart from eager in wall time "
                f"({span(cell['speedup_min'], cell['speedup_max'])}× "
                f"against the eager step of {sections}, {agree}; an interval covering them all, "
                f"{covering(cell)}×, holds 1)")
    return (f"runs {span(cell['speedup_min'], cell['speedup_max'])}× as fast as eager in wall time, against "
            f"the eager step of {sections} ({agree}; an interval covering them all: {covering(cell)}×)")


def answers(comp: pd.DataFrame, story: pd.DataFrame | None = None,
            measurements: pd.DataFrame | None = None) -> list[Answer]:
    """From compile.tables.comparison: eager vs compiled per size, precision and pass; where other
    sections measured the same eager step (compile.across), the speed-up against each of them."""
    ok = comp.dropna(subset=["speedup"]) if not comp.empty else comp
    if ok.empty:
        return (
            [Answer(QUESTION, "Not answered: no size ran both eager and compiled.")] if not comp.empty else []
        )
    parts = []
    told = {}
    for pass_name, part in ok.groupby("pass", sort=False, observed=True):
        cells = [c for c in (_across(story, r) for _, r in part.iterrows()) if c is not None]
        if len(part) == 1 and cells:
            cell = told[pass_name] = cells[0]
            sections = ", ".join(dict.fromkeys(measurements.merge(
                cell[["size", "precision", "attention", "pass", "context_length", "batch_size"]].to_frame().T,
                on=["size", "precision", "attention", "pass", "context_length", "batch_size"])["source"]
                .str.split(" ").str[1])) if measurements is not None else ""
            words = _story_words(cell, f"sections {sections}" if sections else "every section")
            if pd.notna(cell.get("gpu_speedup")):
                words += f"; on the GPU (busy time) {cell['gpu_speedup']:.2f}×"
            parts.append(f"the {PASS_LABELS.get(pass_name, pass_name)} of {cell['size']} {words}")
            continue
        parts.append(
            f"the {PASS_LABELS.get(pass_name, pass_name)} "
            f"{span(part['speedup'].min(), part['speedup'].max())}× "
            f"as fast as eager over {count(len(part), 'size')}"
        )
    compile_s = ok["compile_s"].dropna()
    text = "Compiled, " + "; ".join(parts) + "."
    if len(compile_s):
        text += f" Compiling costs {span(compile_s.min(), compile_s.max(), '.1f')} s once"
        paying = ok.dropna(subset=["break_even_steps"])
        even = paying["break_even_steps"]
        evens = [v for c in told.values() for v in (c["break_even_min"], c["break_even_max"]) if pd.notna(v)]
        if evens:
            even = pd.Series(evens + [float(v) for v in even])
        passes = ", ".join(dict.fromkeys(PASS_LABELS.get(p, p) for p in paying["pass"]))
        text += (
            f"; where compiled is faster ({passes}) it pays for itself after "
            f"{span(even.min(), even.max(), ',.0f')} steps."
            if len(even)
            else "; compiled is faster nowhere, so it never pays for itself."
        )
    # The course asks for both passes: one this run did not compile is said, not left out.
    missing = [name for p, name in (("forward", "forward pass"), ("train_step", "training step"))
               if p not in set(comp["pass"])]
    if missing:
        text += (
            f" The {' and the '.join(missing)} {'was' if len(missing) == 1 else 'were'} not measured "
            "in this run (compile.passes in config.yaml)."
        )
    largest = ok.iloc[-1]
    processes = pd.to_numeric(
        pd.Series([largest.get("eager_processes"), largest.get("compiled_processes")]), errors="coerce"
    ).dropna()
    if len(processes):
        trust = f"{span(processes.min(), processes.max(), '.0f')} fresh processes per mode; " + (
            "their 95% intervals do not overlap"
            if largest.get("apart")
            else "their 95% intervals overlap"
            if largest.get("has_interval")
            else "no interval"
        )
    else:
        trust = "one process per mode: read with the step-to-step spread in the table"
    cell = _across(story, largest)
    if cell is not None:
        trust = (f"eager measured in {int(cell['sources'])} sections; an interval covering them all: "
                 f"{covering(cell)}×")
    told = cell is not None and not cell["covering_low"] <= 1 <= cell["covering_high"]
    speed = (f"{span(cell['speedup_min'], cell['speedup_max'])}× as fast as eager (wall time, against the "
             + ("eager times of several sections, which disagree by up to "
                f"{(cell['max_over_min'] - 1) * 100:.0f}%)" if cell["disagree"] else
                "eager times of several sections)")
             if told else f"{largest['speedup']:.2f}× as fast as eager"
             + (" (wall time; not told apart from eager: an interval covering every section's eager time "
                f"holds 1, {covering(cell)}×)" if cell is not None else ""))
    if cell is not None and pd.notna(cell.get("gpu_speedup")):
        speed += f", {cell['gpu_speedup']:.2f}× on the GPU"
    step = f"{largest['size']}'s {PASS_LABELS.get(largest['pass'], largest['pass'])}"
    # A speed-up the intervals cannot tell from 1 is not headlined as one.
    headline = "" if pd.isna(largest["compile_s"]) else (
        f"torch.compile makes {step} {speed}, after {largest['compile_s']:.0f} s of compiling." if told
        or cell is None else
        f"Under torch.compile, {step} is not told apart from eager ({largest['speedup']:.2f}×; an interval "
        f"covering every section's eager time holds 1, {covering(cell)}×), after "
        f"{largest['compile_s']:.0f} s of compiling."
    )
    return [
        Answer(
            QUESTION,
            text,
            "compile_eager_vs_compiled",
            headline=headline,
            trust=trust,
        )
    ]
