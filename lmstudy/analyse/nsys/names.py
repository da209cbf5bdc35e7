"""Short names of CUDA kernels that a reader tells apart: what the kernel does, not its template.

PyTorch's elementwise kernels share one long start (`void at::native::elementwise_kernel<(int)128,
(int)2, void at::native::gpu_kernel_impl_nocast<...`) and differ deep inside, in the functor or
the lambda's enclosing kernel (MulFunctor, direct_copy_kernel_cuda, masked_fill_kernel). The alias
is the outer kernel's name with those inner names: `elementwise_kernel(MulFunctor)`. Names that
are short already (cuBLAS's GEMMs) stay as they are; the full name stays beside the alias.
"""

from __future__ import annotations

import re

SHORT = 48
_NAMESPACE = r"(?:\w+|<unnamed>|\(anonymous namespace\))::"
_OUTER = re.compile(rf"^(?:void\s+)?(?:{_NAMESPACE})*(\w+)")
# What a kernel does, deep in its template: a functor, an ATen kernel that defined the lambda, a
# reduction's ops, a std:: operator.
_INNER = re.compile(
    r"\b(\w+Functor(?:_\w+)?|\w+_kernel(?:_\w+)?|\w+_functor|\w+Ops"
    r"|std::(?:plus|minus|multiplies|divides)|Sqrt)\b"
)
# Wrappers that say nothing about the operation.
_GENERIC = {
    "elementwise_kernel", "vectorized_elementwise_kernel", "unrolled_elementwise_kernel",
    "gpu_kernel_impl_nocast", "gpu_kernel_impl", "reduce_kernel", "multi_tensor_apply_kernel",
    "elementwise_kernel_with_index", "BinaryFunctor", "AUnaryFunctor", "BUnaryFunctor", "UnaryOpFunctor",
    "BinaryOpScalarFunctor", "BinaryOpScalarListFunctor", "PointwiseOpScalarFunctor",
    "PointwiseOpScalarListFunctor", "TernaryOpScalarFunctor",
}


# Parts of cuBLAS/CUTLASS names that do not tell two GEMMs apart in a table.
_GEMM_NOISE = re.compile(r"^(stage\d+|warpsize\w+|align[a-z]\d+|execute|kernel|5x|cublas|)$")


def _flat_alias(name: str) -> str:
    """A name without namespaces or templates (a GEMM): its tokens that tell it apart."""
    kept = "_".join(t for t in name.split("_") if not _GEMM_NOISE.match(t))
    return kept if len(kept) <= 64 else kept[:63] + "…"


def kernel_alias(name: str) -> str:
    """`void at::native::elementwise_kernel<..., MulFunctor<float>>>(...)` ->
    `elementwise_kernel(MulFunctor)`; a bf16 or fp16 variant says so (` bf16`); short names are
    returned as they are."""
    name = str(name)
    if len(name) <= SHORT:
        return name
    outer = _OUTER.match(name)
    if not outer or "::" not in name and "<" not in name:
        return _flat_alias(name)
    head = outer.group(1)
    if head.startswith("Kernel"):  # CUTLASS: cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_...>
        template = re.search(r"<(\w+)", name)
        if template:
            return _flat_alias(template.group(1))
    inner = [n for n in _INNER.findall(name[outer.end():]) if n not in _GENERIC and n != head]
    # A tensor-by-scalar functor (AUnary, BUnary) is another kernel than tensor-by-tensor (Binary).
    if inner and re.search(r"\b[AB]UnaryFunctor\b", name):
        inner = [inner[0] + " by a scalar", *inner[1:]]
    alias = head + (f"({', '.join(dict.fromkeys(inner[:2]))})" if inner else "")
    if "BFloat16" in name:
        alias += " bf16"
    elif "Half" in name:
        alias += " fp16"
    return alias
