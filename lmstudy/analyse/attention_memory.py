"""The naive attention's memory and FLOPs from shapes and dtypes alone (section 5).

No torch: the attention job (lmstudy.measure.attention) records these predictions
beside what it measures, and the report (lmstudy.sections.attention) shows
the accounting and finds the sequence length that fits, on any CPU.
"""

from __future__ import annotations

import numpy as np

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

    The backward peak is inside the softmax's backward, after probs @ v's
    backward has made the gradients of probs and of v: CUDA's softmax backward
    (aten/src/ATen/native/cuda/SoftMax.cu) first forms ``grad * output``, a
    third S x S tensor beside the gradient of the probs and its own result
    (the gradient of the scores), while the saved softmax output is still
    held. On a CPU that product is fused into the kernel (no third tensor).
    Not counted here: the workspace cuBLAS keeps for the matmuls (a constant,
    64 MiB on an H100 or H200), which the measurement shows on top.
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
        ("grad x probs in softmax's backward (CUDA)", shape_bss, precision, bss * e, "backward peak", False),
        ("gradient of v", shape_bsd, precision, bsd * e, "backward peak", False),
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


# The exponents a fit tries: steps of 0.0005 from 0.25 (memory that hardly grows) to 4.
EXPONENTS = np.arange(0.25, 4.0005, 0.0005)


def fit_constant_plus_power(seq, memory, exponents=EXPONENTS) -> dict | None:
    """Fit memory = constant + coefficient * seq ** exponent; None with fewer than 3 lengths.

    A constant (the cuBLAS workspace, the allocator's rounding) bends a log-log
    slope towards 0 at short sequences, so the exponent of the part that grows
    is only found with the constant fitted beside it. For a fixed exponent the
    model is linear in the constant and the coefficient: each candidate
    exponent of a fine grid is one exact least-squares solve (relative
    residuals, so that the shortest sequence counts as much as the longest),
    and the exponent kept is the one with the smallest residual. No starting
    guess to go wrong, and no local minimum to fall into. A constant that
    comes out negative is fixed at 0 (memory has no negative part).
    Returns constant (bytes), coefficient, exponent and the largest relative
    residual.
    """
    x = np.asarray(seq, dtype=float)
    y = np.asarray(memory, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    if len(np.unique(x)) < 3:
        return None
    k = np.asarray(exponents, dtype=float)[:, None]
    # Relative residual (c + a x^k - y) / y: columns 1/y and x^k/y against a target of ones.
    u = np.broadcast_to(1 / y, (len(k), len(y)))
    v = x**k / y
    suu, svv, suv = (u * u).sum(1), (v * v).sum(1), (u * v).sum(1)
    su, sv = u.sum(1), v.sum(1)
    det = suu * svv - suv**2
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (su * svv - sv * suv) / det
        a = (suu * sv - suv * su) / det
        clamped = c < 0
        c = np.where(clamped, 0.0, c)
        a = np.where(clamped, sv / svv, a)
    residual = ((c[:, None] * u + a[:, None] * v - 1) ** 2).sum(1)
    residual = np.where(np.isfinite(residual) & (a > 0), residual, np.inf)
    best = int(np.argmin(residual))
    fitted = c[best] + a[best] * x ** k[best, 0]
    return {
        "constant": float(c[best]),
        "coefficient": float(a[best]),
        "exponent": float(k[best, 0]),
        "max_relative_residual": float(np.max(np.abs(fitted / y - 1))),
    }
