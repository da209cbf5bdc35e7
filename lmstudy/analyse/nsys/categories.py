"""Sort kernels into categories by one ordered set of rules on their names.

The first rule whose pattern matches the (demangled) name wins, so the order
matters: an `elementwise_kernel` that copies (direct_copy_kernel) is a memory
copy, a `multi_tensor_apply_kernel` doing Adam's arithmetic is the optimizer.
The same rules read CUDA kernel names (nsys, torch.profiler on a GPU) and
ATen operator names (torch.profiler on a CPU, where operators stand in for
kernels). Fused attention kernels (flash, cuDNN SDPA) are neither GEMM nor
softmax alone: they are `other`.
"""

from __future__ import annotations

import re

CATEGORIES = (
    "GEMM",
    "softmax",
    "elementwise",
    "reduction",
    "optimizer",
    "memory copy/set",
    "fused (Triton)",
    "other",
)

_POINTWISE_OPS = (
    "add|sub|rsub|mul|div|neg|pow|rsqrt|sqrt|exp|log|silu|silu_backward|sigmoid|relu|gelu|"
    "cos|sin|masked_fill|masked_fill_|where|tril|triu|lerp|addcmul|addcdiv|clamp|maximum|"
    "minimum|sign|abs|reciprocal|threshold_backward|gelu_backward|index|index_put|"
    "embedding_dense_backward|_to_copy_placeholder"
)

RULES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        # torch.compile's generated kernels fuse several operators, so their
        # names (triton_poi_fused__to_copy_mul_silu_0) say no one thing they do.
        ("fused (Triton)", r"^triton_"),
        # Memory: copy and fill kernels are "elementwise" by template only.
        (
            "memory copy/set",
            r"^\[CUDA mem|^Memcpy|^Memset|copy_kernel|FillFunctor|"
            r"^aten::(copy_|fill_|zero_|zeros_like|clone|contiguous|_to_copy|"
            r"cat|stack|empty_like)$",
        ),
        # Fused attention does matmuls and a softmax in one kernel.
        ("other", r"flash|fmha|_sdpa_|sdpa_sm\d+|scaled_dot_product|compute_dot_do_o|convert_dq"),
        ("optimizer", r"multi_tensor_apply|adam|_foreach_|fused_sgd|optimizer"),
        (
            "GEMM",
            r"gemm|xmma|cutlass|nvjet|cublas|splitKreduce|^aten::(mm|bmm|addmm|baddbmm|"
            r"matmul|linear|_scaled_mm)$",
        ),
        ("softmax", r"softmax"),
        (
            "reduction",
            r"reduce_kernel|reduce_cuda|nll_loss|reduction|^aten::(sum|mean|amax|max|"
            r"min|norm|nll_loss\w*|argmax|var|std|logsumexp)$",
        ),
        (
            "elementwise",
            r"elementwise|gather|scatter|index|triu_tril|unrolled|"
            rf"^aten::({_POINTWISE_OPS})_?$",
        ),
    )
)


def categorize(name: str, kind: str = "kernel") -> str:
    """The category of one kernel (or, on a CPU profile, operator)."""
    if kind in ("memcpy", "memset"):
        return "memory copy/set"
    for category, pattern in RULES:
        if pattern.search(name):
            return category
    return "other"
