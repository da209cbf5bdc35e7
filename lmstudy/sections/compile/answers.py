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


def _gpu_words(part: pd.DataFrame) -> str:
    gpu = part["gpu_speedup"].dropna() if "gpu_speedup" in part else pd.Series(dtype=float)
    return f"; on the GPU (busy time) {span(gpu.min(), gpu.max())}×" if len(gpu) else ""


def _pass_words(pass_name: str, part: pd.DataFrame) -> str:
    """One pass's wall-time speed-up where its intervals decide it, given as not decided where they do not."""
    name = PASS_LABELS.get(pass_name, pass_name)
    apart, unclear = part[part["apart"]], part[~part["apart"]]
    said = []
    if len(apart):
        said.append(f"{span(apart['speedup'].min(), apart['speedup'].max())}× as fast as eager in wall time "
                    f"over {count(len(apart), 'size')}")
    if len(unclear):
        intervals = ", ".join(
            f"{r['size']} {r['speedup']:.2f}× ({r['eager_ci_low_ms'] / r['compiled_ci_high_ms']:.3g}–"
            f"{r['eager_ci_high_ms'] / r['compiled_ci_low_ms']:.3g}×)" if r["has_interval"]
            else f"{r['size']} {r['speedup']:.2f}× (one process: no interval)"
            for _, r in unclear.iterrows())
        said.append(f"not decided in wall time over {count(len(unclear), 'size')} ({intervals})")
    return f"the {name} is " + "; ".join(said) + _gpu_words(part)


def _pays(row, cell) -> str:
    """When the compile of one configuration has paid for itself, from the gain its measure decides
    (compile.tables.break_even; compile.across.story where several sections measured the eager step)."""
    name = f"{row['size']}'s {PASS_LABELS.get(row['pass'], row['pass'])}"
    if cell is not None:
        low, high, source = cell["break_even_min"], cell["break_even_max"], cell["break_even_from"]
    else:
        low = high = row["break_even_steps"]
        source = row["break_even_from"]
    if pd.isna(low):
        why = ("compiled and eager are not told apart in wall time nor on the GPU"
               if source == "not told apart" else str(source))
        return f"{name} has no break-even ({why})"
    steps = span(min(low, high), max(low, high), ",.0f")
    if source == "GPU time":
        return (f"{name} pays for itself after {steps} steps against its GPU-time gain "
                f"({row['eager_gpu_busy_ms']:.3g} → {row['compiled_gpu_busy_ms']:.3g} ms a step; wall time "
                f"decides no gain)")
    return f"{name} pays for itself after {steps} steps against its wall-time gain"


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
        parts.append(_pass_words(pass_name, part))
    compile_s = ok["compile_s"].dropna()
    text = "Compiled, " + "; ".join(parts) + "."
    if len(compile_s):
        text += f" Compiling costs {span(compile_s.min(), compile_s.max(), '.1f')} s once"
        text += "; " + "; ".join(_pays(r, _across(story, r)) for _, r in ok.iterrows()) + "."
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
    gpu = largest.get("gpu_speedup")
    gpu = f"; on the GPU (busy time) {gpu:.2f}×" if pd.notna(gpu) else ""
    step = f"{largest['size']}'s {PASS_LABELS.get(largest['pass'], largest['pass'])}"
    # A speed-up the intervals cannot tell from 1 is not headlined as one.
    headline = "" if pd.isna(largest["compile_s"]) else (
        f"torch.compile makes {step} {speed}, after {largest['compile_s']:.0f} s of compiling." if told
        or (cell is None and largest["apart"]) else
        f"Under torch.compile {step} is not told apart from eager in wall time ({largest['speedup']:.2f}×, "
        "intervals overlap" + (f"{gpu}), after {largest['compile_s']:.0f} s of compiling." if gpu else
                               f"), after {largest['compile_s']:.0f} s of compiling.") if cell is None else
        f"Under torch.compile {step} is not told apart from eager in wall time ({largest['speedup']:.2f}×; "
        f"an interval covering every section's eager time holds 1, {covering(cell)}×{gpu}), after "
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
