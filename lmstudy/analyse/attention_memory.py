"""The naive attention's memory and FLOPs from shapes and dtypes alone (section 5).

No torch: the attention job (lmstudy.measure.attention) records these predictions
beside what it measures, and the report (lmstudy.report.sections.attention) shows
the accounting and finds the sequence length that fits, on any CPU.
"""

from __future__ import annotations

BYTES = {"fp32": 4, "bf16": 2}


def attention_flops(batch: int, seq: int, head_dim: int) -> float:
    """FLOPs of the two matrix products of one forward, the full S x S computed."""
    return 2 * 2 * batch * seq * seq * head_dim


def naive_memory_accounting(batch: int, seq: int, head_dim: int, precision: str) -> list[dict]:
    """The memory of one eager naive forward and backward, tensor by tensor.

    From shapes and dtypes alone. `held` says when a tensor counts:
    "before backward" for what is in use when the backward starts (the
    inputs; the upstream gradient the benchmark holds; what autograd saved:
    q and k for q @ k^T, the inverted causal mask for masked_fill, the softmax
    output, saved once for softmax and for probs @ v, and v; and the output),
    "forward peak" and "backward peak" for what exists on top of that at the
    height of each pass. `saved` marks the tensors autograd keeps for the
    backward. The scores before the softmax are not saved: they are freed as
    soon as the next step has used them.
    """
    e = BYTES[precision]
    bsd, bss, ss = batch * seq * head_dim, batch * seq * seq, seq * seq
    shape_bsd, shape_bss = f"{batch}x1x{seq}x{head_dim}", f"{batch}x1x{seq}x{seq}"
    rows = [
        ("q, k, v (inputs)", f"3 x {shape_bsd}", precision, 3 * bsd * e, "before backward", True),
        ("upstream gradient of the output", shape_bsd, precision, bsd * e, "before backward", False),
        ("inverted causal mask (masked_fill)", f"{seq}x{seq}", "bool", ss, "before backward", True),
        ("softmax output (softmax, probs @ v)", shape_bss, precision, bss * e, "before backward", True),
        ("output", shape_bsd, precision, bsd * e, "before backward", False),
        ("scores beside masked scores", shape_bss, precision, bss * e, "forward peak", False),
        ("causal mask before inversion", f"{seq}x{seq}", "bool", ss, "forward peak", False),
        (
            "gradients of probs and of scores",
            f"2 x {shape_bss}",
            precision,
            2 * bss * e,
            "backward peak",
            False,
        ),
    ]
    keys = ("tensor", "shape", "dtype", "bytes", "held", "saved")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def predicted_bytes(batch: int, seq: int, head_dim: int, precision: str) -> dict[str, int]:
    """Totals of the accounting: saved for backward, in use before it, and peak."""
    rows = naive_memory_accounting(batch, seq, head_dim, precision)
    before = sum(r["bytes"] for r in rows if r["held"] == "before backward")
    extra = {
        held: sum(r["bytes"] for r in rows if r["held"] == held) for held in ("forward peak", "backward peak")
    }
    return {
        "saved": sum(r["bytes"] for r in rows if r["saved"]),
        "before_backward": before,
        "peak": before + max(extra.values()),
    }
