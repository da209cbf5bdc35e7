"""Section 6, the whole model under torch.compile: the answer to the course's question (b)."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import Answer, count, span
from lmstudy.report.sections.labels import PASS_LABELS

QUESTION = (
    "torch_compile (b): how much faster is the compiled model, forward and training step, and at what cost?"
)


def answers(comp: pd.DataFrame) -> list[Answer]:
    """From compile.tables.comparison: eager vs compiled per size, precision and pass."""
    ok = comp.dropna(subset=["speedup"]) if not comp.empty else comp
    if ok.empty:
        return (
            [Answer(QUESTION, "Not answered: no size ran both eager and compiled.")] if not comp.empty else []
        )
    parts = []
    for pass_name, part in ok.groupby("pass", sort=False, observed=True):
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
    headline = (
        f"torch.compile makes {largest['size']}'s {PASS_LABELS.get(largest['pass'], largest['pass'])} "
        f"{largest['speedup']:.2f}× as fast as eager, after {largest['compile_s']:.0f} s of compiling."
        if pd.notna(largest["compile_s"])
        else ""
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
