"""Section 6, the whole model under torch.compile: the answer to the course's question (b)."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import Answer, count, span
from lmstudy.report.contract import wording
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


_say = wording(__name__)


def _disagree_by(cell: pd.Series) -> float | None:
    """How far, in percent, the sections' eager steps disagree beyond their intervals; None: they agree."""
    return (cell["max_over_min"] - 1) * 100 if cell["disagree"] else None


def _holds_one(cell: pd.Series) -> bool:
    return cell["covering_low"] <= 1 <= cell["covering_high"]


def _across_part(pass_name: str, cell: pd.Series, measurements: pd.DataFrame | None) -> str:
    """One pass of one size against the eager step of every section that measured it."""
    key = ["size", "precision", "attention", "pass", "context_length", "batch_size"]
    sections = list(dict.fromkeys(measurements.merge(cell[key].to_frame().T, on=key)["source"]
                                  .str.split(" ").str[1])) if measurements is not None else []
    gpu = cell.get("gpu_speedup")
    return _say("across_part", name=PASS_LABELS.get(pass_name, pass_name), size=cell["size"],
                speedups=span(cell["speedup_min"], cell["speedup_max"]), sections=sections,
                disagree_by=_disagree_by(cell), covering=covering(cell), holds_one=_holds_one(cell),
                gpu=gpu if pd.notna(gpu) else None)


def _pass_part(pass_name: str, part: pd.DataFrame) -> str:
    """One pass's wall-time speed-up where its intervals decide it, given as not decided where they do not."""
    apart, unclear = part[part["apart"]], part[~part["apart"]]
    rows = [{"size": r["size"], "speedup": r["speedup"],
             "interval": (r["eager_ci_low_ms"] / r["compiled_ci_high_ms"],
                          r["eager_ci_high_ms"] / r["compiled_ci_low_ms"]) if r["has_interval"] else None}
            for _, r in unclear.iterrows()]
    gpu = part["gpu_speedup"].dropna() if "gpu_speedup" in part else pd.Series(dtype=float)
    return _say(
        "pass_part", name=PASS_LABELS.get(pass_name, pass_name),
        apart={"speedups": span(apart["speedup"].min(), apart["speedup"].max()),
               "sizes": count(len(apart), "size")} if len(apart) else None,
        unclear={"sizes": count(len(unclear), "size"), "rows": rows} if len(unclear) else None,
        gpu=span(gpu.min(), gpu.max()) if len(gpu) else None)


def _pays(row, cell) -> str:
    """When the compile of one configuration has paid for itself, from the gain its measure decides
    (compile.tables.break_even; compile.across.story where several sections measured the eager step)."""
    if cell is not None:
        low, high, source = cell["break_even_min"], cell["break_even_max"], cell["break_even_from"]
    else:
        low = high = row["break_even_steps"]
        source = row["break_even_from"]
    return _say("pays", size=row["size"], step=PASS_LABELS.get(row["pass"], row["pass"]),
                steps=None if pd.isna(low) else span(min(low, high), max(low, high), ",.0f"), source=source,
                eager_ms=row.get("eager_gpu_busy_ms"), compiled_ms=row.get("compiled_gpu_busy_ms"))


def _trust(largest: pd.Series, cell: pd.Series | None) -> str:
    processes = pd.to_numeric(
        pd.Series([largest.get("eager_processes"), largest.get("compiled_processes")]), errors="coerce"
    ).dropna()
    return _say("trust", sources=int(cell["sources"]) if cell is not None else None,
                covering=covering(cell) if cell is not None else None,
                processes=span(processes.min(), processes.max(), ".0f") if len(processes) else None,
                intervals=("apart" if largest.get("apart") else "overlap" if largest.get("has_interval")
                           else None))


def _headline(largest: pd.Series, cell: pd.Series | None) -> str:
    if pd.isna(largest["compile_s"]):
        return ""
    across_gpu = cell.get("gpu_speedup") if cell is not None else None
    gpu = largest.get("gpu_speedup")
    return _say("headline", at={
        "size": largest["size"], "step": PASS_LABELS.get(largest["pass"], largest["pass"]),
        "told": cell is not None and not _holds_one(cell),
        "speedups": span(cell["speedup_min"], cell["speedup_max"]) if cell is not None else None,
        "disagree_by": _disagree_by(cell) if cell is not None else None,
        "across_gpu": across_gpu if pd.notna(across_gpu) else None,
        "apart": bool(largest["apart"]), "speedup": largest["speedup"],
        "covering": covering(cell) if cell is not None else None,
        "gpu": gpu if pd.notna(gpu) else None, "compile_s": largest["compile_s"],
    })


def answers(comp: pd.DataFrame, story: pd.DataFrame | None = None,
            measurements: pd.DataFrame | None = None) -> list[Answer]:
    """From compile.tables.comparison: eager vs compiled per size, precision and pass; where other
    sections measured the same eager step (compile.across), the speed-up against each of them."""
    ok = comp.dropna(subset=["speedup"]) if not comp.empty else comp
    if ok.empty:
        return [Answer(QUESTION, _say("no_answer"))] if not comp.empty else []
    parts = []
    for pass_name, part in ok.groupby("pass", sort=False, observed=True):
        cells = [c for c in (_across(story, r) for _, r in part.iterrows()) if c is not None]
        parts.append(_across_part(pass_name, cells[0], measurements) if len(part) == 1 and cells
                     else _pass_part(pass_name, part))
    compile_s = ok["compile_s"].dropna()
    text = _say(
        "answer", parts=parts,
        compile_span=span(compile_s.min(), compile_s.max(), ".1f") if len(compile_s) else None,
        pays=[_pays(r, _across(story, r)) for _, r in ok.iterrows()] if len(compile_s) else [],
        missing=[name for p, name in (("forward", "forward pass"), ("train_step", "training step"))
                 if p not in set(comp["pass"])])
    largest = ok.iloc[-1]
    cell = _across(story, largest)
    return [Answer(QUESTION, text, "compile_eager_vs_compiled", headline=_headline(largest, cell),
                   trust=_trust(largest, cell))]
