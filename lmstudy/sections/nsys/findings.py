"""Section 2, Nsight Systems: kernel tables, category shares and findings.

The functions that compute its findings (sentences) from its tables: each small one is marked
@finds and returns its findings with the rows behind them (lmstudy.report.finding).
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.nsys import tables as T
from lmstudy.report import contract
from lmstudy.report.answers import between, count
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.report.labels import PASS_LABELS, sentence_start
from lmstudy.sections.nsys.tables import words


def _span(low: float, high: float, fmt: str = ".0f") -> str:
    return f"{low:{fmt}}" if f"{low:{fmt}}" == f"{high:{fmt}}" else f"{low:{fmt}}–{high:{fmt}}"


_say = contract.wording(__name__)


@finds
def _out_of_memory(runs: pd.DataFrame) -> list[Finding]:
    """The profiled configurations that ran out of memory."""
    failed = runs[runs["status"] != "ok"] if not runs.empty else runs
    if not len(failed):
        return []
    named = [(r["size"], r["context_length"], PASS_LABELS.get(r["pass"], r["pass"]))
             for _, r in failed.iterrows()]
    return [Finding(_say("out_of_memory", failed=named, total=len(runs)), rows_behind(runs, "status"))]


def _why_apart(worst, inside) -> tuple[str, float | None]:
    """Where the gap between the span and the timing section's median comes from, as far as the
    timer inside the capture (the same process as the span) tells it; and the span over that timer."""
    if pd.isna(inside) or not inside > 0:
        return "untimed", None
    own = worst["nsys step ms"] / inside
    if abs(own - 1) <= 0.10:
        return "traced", own
    return ("slower" if own > 1 else "not slower"), own


@finds
def _step_span(ranges: pd.DataFrame, runs: pd.DataFrame, timing: pd.DataFrame) -> list[Finding]:
    """The profiler's span of a step against the timing section's median (and the timer in the capture)."""
    said = words(runs)
    a = T.forward_time_table(ranges, runs, timing)
    if a.empty or not a["nsys step / timer"].notna().any():
        return []
    ratio = a["nsys step / timer"].dropna()
    worst = a.loc[(ratio - 1).abs().idxmax()]
    inside = worst.get("capture timer ms")
    apart = (ratio - 1).abs().max() > 0.10
    why, own = _why_apart(worst, inside) if apart else (None, None)
    text = _say(
        "step_span", short=sentence_start(said["short"]), kernel=said["kernel"],
        spread=between(ratio.min(), ratio.max(), ".2f", "×"),
        configurations=count(len(ratio), "configuration"),
        worst={"size": worst["size"], "context": worst["context_length"],
               "pass": PASS_LABELS.get(worst["pass"], worst["pass"]), "span_ms": worst["nsys step ms"],
               "timer_ms": worst["timer step ms"], "inside_ms": inside if pd.notna(inside) else None}
        if apart else None,
        why=why, own=own)
    behind = rows_behind(a.loc[ratio.index], "nsys step ms", "timer step ms", "capture timer ms",
                         "nsys step / timer")
    return [Finding(text, behind)]


@finds
def _top_kernels(kernels: pd.DataFrame, runs: pd.DataFrame) -> list[Finding]:
    """Per phase: the category of its top kernel in each configuration, and that kernel's share."""
    if kernels.empty:  # every run out of memory: kernels.csv has no columns
        return []
    said = words(runs)
    b = T.top_kernels(kernels)
    items = []
    for phase in T.PHASES:
        part = b[b["phase"] == phase] if not b.empty else b
        if not len(part):
            continue
        common = part["category"].value_counts()
        # The share of the configurations whose top kernel is of that category, not of every one.
        same = part[part["category"] == common.index[0]]
        text = _say("top_kernel", phase=phase, kernel=said["kernel"], time=said["time"],
                    category=common.index[0] if common.index[0] != phase else None, common=common.iloc[0],
                    of=len(part), share=_span(same["share of phase %"].min(), same["share of phase %"].max()),
                    others=list(common.index[1:]))
        items.append(Finding(text, rows_behind(part, "phase", "kernel", "category", "ms per step",
                                               "share of phase %")))
    return items


@finds
def _gemm_share(kernels: pd.DataFrame, runs: pd.DataFrame) -> list[Finding]:
    """GEMMs' share of the time, in inference and in a training step, over the configurations with both."""
    if kernels.empty:
        return []
    d = T.gemm_share(kernels)
    if not {"inference GEMM %", "training GEMM %"} <= set(d.columns):
        return []
    both = d.dropna(subset=["inference GEMM %", "training GEMM %"])
    if not len(both):
        return []
    said = words(runs)
    return [Finding(
        _say("gemm_share", inference=both["inference GEMM %"].mean(), training=both["training GEMM %"].mean(),
             time=said["time"], configurations=len(both)),
        rows_behind(both, "inference GEMM %", "training GEMM %"))]


@finds
def _softmax_against_matmul(kernels: pd.DataFrame) -> list[Finding]:
    """Inside attention: softmax's time over the matmuls', against its FLOPs over theirs."""
    if kernels.empty:
        return []
    e = T.attention_table(kernels)
    if e.empty or not e["time ratio / FLOP ratio"].notna().any():
        return []
    top = e.loc[e["time ratio / FLOP ratio"].idxmax()]
    return [Finding(
        _say("softmax",
             time_span=_span(e["time softmax/matmul"].min(), e["time softmax/matmul"].max(), ".2f"),
             flops_span=_span(e["FLOPs softmax/matmul"].min(), e["FLOPs softmax/matmul"].max(), ".3f"),
             slower=top["time ratio / FLOP ratio"], size=top["size"], context=top["context_length"]),
        rows_behind(e, "softmax ms", "matmul ms", "time softmax/matmul", "FLOPs softmax/matmul",
                    "time ratio / FLOP ratio"))]


@finds
def _autograd_thread(kernels: pd.DataFrame, runs: pd.DataFrame) -> list[Finding]:
    """The share of the backward pass's time that autograd's own thread launched."""
    if kernels.empty:
        return []
    adopted = T.adopted_share(kernels)
    if adopted.empty or not adopted["adopted_ns"].sum() > 0:
        return []
    said = words(runs)
    share = adopted["adopted % of backward"]
    return [Finding(
        _say("autograd_thread", share=_span(share.min(), share.max()), time=said["time"]),
        rows_behind(adopted, "adopted_ns", "total_ns", "adopted % of backward"))]


# Declared in the section's contract: each writes one kind of finding with the rows behind it.
FINDINGS = (_out_of_memory, _step_span, _top_kernels, _gemm_share, _softmax_against_matmul, _autograd_thread)


def findings(data: dict[str, pd.DataFrame]) -> list[Finding]:
    """Every finding of the section, in the report's order."""
    kernels, runs = data["kernels"], data["runs"]
    return gather(
        _out_of_memory(runs),
        _step_span(data["ranges"], runs, data["timing"]),
        _top_kernels(kernels, runs),
        _gemm_share(kernels, runs),
        _softmax_against_matmul(kernels),
        _autograd_thread(kernels, runs),
    )
