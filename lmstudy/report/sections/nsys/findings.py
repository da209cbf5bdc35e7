"""Section 2, Nsight Systems: kernel tables, category shares and findings.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.nsys import tables as T
from lmstudy.report.sections.nsys.tables import words


def _pct(x: float) -> str:
    return f"{x:.1f}%"


def _span(low: float, high: float, fmt: str = ".0f") -> str:
    return f"{low:{fmt}}" if f"{low:{fmt}}" == f"{high:{fmt}}" else f"{low:{fmt}}–{high:{fmt}}"


def _a(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def findings(data: dict[str, pd.DataFrame]) -> list[str]:
    kernels, runs = data["kernels"], data["runs"]
    said = words(runs)
    items = []
    failed = runs[runs["status"] != "ok"] if not runs.empty else runs
    if len(failed):
        names = ", ".join(f"{r['size']} ctx {r['context_length']} {r['pass']}" for _, r in failed.iterrows())
        items.append(f"{len(failed)} of {len(runs)} configurations ran out of memory ({names}).")
    a = T.forward_time_table(data["ranges"], runs, data["timing"])
    if not a.empty and a["nsys step / timer"].notna().any():
        ratio = a["nsys step / timer"].dropna()
        worst = a.loc[(ratio - 1).abs().idxmax()]
        inside = worst.get("capture timer ms")
        items.append(
            f"{said['short'].capitalize()}'s per-step span (from a step's first {said['kernel']} "
            f"starting to its last ending, idle gaps included) is {ratio.min():.2f}× to "
            f"{ratio.max():.2f}× the timing section's "
            f"median over {len(ratio)} configurations; the largest gap is {worst['size']} ctx "
            f"{worst['context_length']} {worst['pass']} ({worst['nsys step ms']:.3g} ms vs "
            f"{worst['timer step ms']:.3g} ms"
            + (f"; the timer inside the capture read {inside:.3g} ms" if pd.notna(inside) else "")
            + (
                "). Far from 1, the step is launch-bound: the GPU waits between kernels, and tracing "
                "slows the host that launches them."
                if said["kernel"] == "kernel"
                else "). Far from 1, the profiler's tracing of every operator slows the CPU that runs them."
            )
            if (ratio - 1).abs().max() > 0.10
            else f"{said['short'].capitalize()}'s per-step span is {ratio.min():.2f}× to "
            f"{ratio.max():.2f}× the timing section's median over {len(ratio)} configurations."
        )
    if kernels.empty:  # every run out of memory: kernels.csv has no columns, nothing more to find
        return items
    b = T.top_kernels(kernels)
    for phase in T.PHASES:
        part = b[b["phase"] == phase] if not b.empty else b
        if len(part):
            common = part["category"].value_counts()
            share = f"{_span(part['share of phase %'].min(), part['share of phase %'].max())}%"
            # "The top optimizer kernel is an optimizer kernel" says nothing: only its share then.
            kind = (
                f"is {_a(common.index[0])} {said['kernel']} in {common.iloc[0]} of {len(part)} "
                "configurations, "
                "taking "
                if common.index[0] != phase
                else "takes "
            )
            items.append(f"The top {phase} {said['kernel']} {kind}{share} of {phase} {said['time']}.")
    d = T.gemm_share(kernels)
    if {"inference GEMM %", "training GEMM %"} <= set(d.columns):
        both = d.dropna(subset=["inference GEMM %", "training GEMM %"])
        if len(both):
            items.append(
                f"GEMMs take {_pct(both['inference GEMM %'].mean())} of {said['time']} in inference and "
                f"{_pct(both['training GEMM %'].mean())} in a training step (mean over {len(both)} "
                "size × context configurations)."
            )
    e = T.attention_table(kernels)
    if not e.empty and e["time ratio / FLOP ratio"].notna().any():
        top = e.loc[e["time ratio / FLOP ratio"].idxmax()]
        items.append(
            f"Inside attention, softmax takes "
            f"{_span(e['time softmax/matmul'].min(), e['time softmax/matmul'].max(), '.2f')}× the "
            "matmul time while doing "
            f"{_span(e['FLOPs softmax/matmul'].min(), e['FLOPs softmax/matmul'].max(), '.3f')}× their "
            f"FLOPs: per FLOP it is up to {top['time ratio / FLOP ratio']:.0f}× slower "
            f"({top['size']} ctx {top['context_length']})."
        )
    adopted = T.adopted_share(kernels)
    if not adopted.empty and adopted["adopted_ns"].sum() > 0:
        items.append(
            "Autograd's own thread launched "
            f"{_span(adopted['adopted % of backward'].min(), adopted['adopted % of backward'].max())}% "
            f"of the backward pass's {said['time']}; "
            "those kernels are attributed to the backward range."
        )
    return items
