"""Section 2, Nsight Systems: kernel tables, category shares and findings.

The functions that compute its findings (sentences) from its tables: each small one is marked
@finds and returns its findings with the rows behind them (lmstudy.report.finding).
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.nsys import tables as T
from lmstudy.report.answers import between, count
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.report.labels import PASS_LABELS, sentence_start
from lmstudy.sections.nsys.tables import words


def _pct(x: float) -> str:
    return f"{x:.1f}%"


def _span(low: float, high: float, fmt: str = ".0f") -> str:
    return f"{low:{fmt}}" if f"{low:{fmt}}" == f"{high:{fmt}}" else f"{low:{fmt}}–{high:{fmt}}"


def _a(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


@finds
def _out_of_memory(runs: pd.DataFrame) -> list[Finding]:
    """The profiled configurations that ran out of memory."""
    failed = runs[runs["status"] != "ok"] if not runs.empty else runs
    if not len(failed):
        return []
    names = ", ".join(f"{r['size']} ctx {r['context_length']} {PASS_LABELS.get(r['pass'], r['pass'])}"
                      for _, r in failed.iterrows())
    which = (f"{len(failed)} of {len(runs)} configurations" if len(failed) < len(runs) else
             "The one profiled configuration" if len(runs) == 1
             else f"All {len(runs)} profiled configurations")
    return [Finding(f"{which} ran out of memory ({names}).",
                    rows_behind(runs, "status"))]


def _why_apart(worst, inside, said) -> str:
    """Where the gap between the span and the timing section's median comes from, as far as the
    timer inside the capture (the same process as the span) tells it."""
    span = worst["nsys step ms"]
    if pd.isna(inside) or not inside > 0:
        return (". The timing section's median comes from other processes of another job, and this run has "
                "no timer inside the capture, so the gap mixes the variation between processes with the "
                "profiler's overhead.")
    own = span / inside
    if abs(own - 1) <= 0.10:
        # That timer runs under the same tracing (review M3): agreeing with it shows the span measures the
        # traced step, not that tracing costs nothing.
        return (f". The span is {own:.2f}× the timer of its own process, which ran under the same tracing: "
                "the span measures the traced step, but no step of that process ran untraced, so the gap to "
                "the timing section's median (other processes of another job) mixes the profiler's "
                "overhead with the variation between processes, which moves a host-bound step from one "
                "process to the next.")
    slower = "slows" if own > 1 else "does not slow"
    return (f". The span is {own:.2f}× the timer of its own process too: the profiler {slower} the step "
            f"it traces ({said['kernel']}s launched under tracing).")


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
    spread = between(ratio.min(), ratio.max(), ".2f", "×")
    text = (
        f"{sentence_start(said['short'])}'s per-step span (from a step's first {said['kernel']} "
        f"starting to its last ending, idle gaps included) is {spread} "
        "the timing section's "
        f"median over {count(len(ratio), 'configuration')}; the largest gap is {worst['size']} ctx "
        f"{worst['context_length']} {PASS_LABELS.get(worst['pass'], worst['pass'])} "
        f"({worst['nsys step ms']:.3g} ms vs "
        f"{worst['timer step ms']:.3g} ms"
        + (f"; the timer inside the capture read {inside:.3g} ms" if pd.notna(inside) else "")
        + ")" + _why_apart(worst, inside, said)
        if (ratio - 1).abs().max() > 0.10
        else f"{sentence_start(said['short'])}'s per-step span is {spread} "
        f"the timing section's median over {count(len(ratio), 'configuration')}."
    )
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
        share = f"{_span(same['share of phase %'].min(), same['share of phase %'].max())}%"
        others = ", ".join(f"{_a(c)} {said['kernel']}" for c in common.index[1:])
        # "The top optimizer kernel is an optimizer kernel" says nothing: only its share then.
        where = "" if len(part) == 1 else (
            (" in both configurations" if len(part) == 2 else f" in all {len(part)} configurations")
            if common.iloc[0] == len(part)
            else f" in {common.iloc[0]} of {len(part)} configurations")
        kind = (
            f"is {_a(common.index[0])} {said['kernel']}{where}, taking "
            if common.index[0] != phase
            else "takes "
        )
        elsewhere = f" (in the others, {others})" if others else ""
        items.append(Finding(f"The top {phase} {said['kernel']} {kind}{share} of {phase} {said['time']}"
                             f"{elsewhere}.",
                             rows_behind(part, "phase", "kernel", "category", "ms per step",
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
        f"GEMMs take {_pct(both['inference GEMM %'].mean())} of {said['time']} in inference and "
        f"{_pct(both['training GEMM %'].mean())} in a training step (mean over {len(both)} "
        "size × context configurations).",
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
        f"Inside attention, softmax takes "
        f"{_span(e['time softmax/matmul'].min(), e['time softmax/matmul'].max(), '.2f')}× the "
        "matmul time while doing "
        f"{_span(e['FLOPs softmax/matmul'].min(), e['FLOPs softmax/matmul'].max(), '.3f')}× their "
        f"FLOPs: per FLOP it is up to {top['time ratio / FLOP ratio']:.0f}× slower "
        f"({top['size']} ctx {top['context_length']}).",
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
    return [Finding(
        "Autograd's own thread launched "
        f"{_span(adopted['adopted % of backward'].min(), adopted['adopted % of backward'].max())}% "
        f"of the backward pass's {said['time']}; "
        "those kernels are attributed to the backward range.",
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
