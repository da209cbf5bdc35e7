"""The category rules on real kernel names from H200 nsys exports."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lmstudy.analyse.nsys.categories import CATEGORIES, categorize

GPU = Path(__file__).parent / "fixtures" / "gpu"


def real_names() -> set[str]:
    names = set()
    for path in GPU.glob("nsys_*.sqlite"):
        con = sqlite3.connect(path)
        names |= {
            row[0]
            for row in con.execute(
                "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN StringIds s ON s.id = k.demangledName"
            )
        }
        con.close()
    return names


NAMES = real_names()


def named(fragment: str) -> list[str]:
    found = [n for n in NAMES if fragment in n]
    assert found, f"no fixture kernel name contains {fragment!r}"
    return found


@pytest.mark.parametrize(
    ("fragment", "category"),
    [
        ("sm80_xmma_gemm_f32f32", "GEMM"),  # cuBLAS fp32 GEMM
        ("nvjet_sm90_tst", "GEMM"),  # cuBLAS bf16 GEMM on Hopper
        ("cutlass_80_simt_sgemm", "GEMM"),
        ("cublasLt::splitKreduce_kernel", "GEMM"),  # the second half of a split-K GEMM
        ("softmax_warp_forward", "softmax"),
        ("softmax_warp_backward", "softmax"),
        ("at::native::reduce_kernel", "reduction"),
        ("nll_loss_forward_reduce_cuda_kernel_2d", "reduction"),
        ("multi_tensor_apply_kernel", "optimizer"),  # AdamW's foreach steps
        ("direct_copy_kernel_cuda", "memory copy/set"),
        ("bfloat16_copy_kernel_cuda", "memory copy/set"),  # autocast's casts
        ("FillFunctor", "memory copy/set"),
        ("silu_kernel", "elementwise"),
        ("MulFunctor", "elementwise"),
        ("masked_fill_kernel", "elementwise"),
        ("vectorized_gather_kernel", "elementwise"),  # the embedding lookup
        ("sdpa_sm90_flash_fprop", "other"),  # fused attention: neither GEMM nor softmax alone
        ("DeviceRadixSortSingleTileKernel", "other"),
    ],
)
def test_real_kernel_names(fragment, category):
    for name in named(fragment):
        assert categorize(name) == category, name


def test_every_real_name_gets_a_known_category_and_most_are_not_other():
    categories = {name: categorize(name) for name in NAMES}
    assert set(categories.values()) <= set(CATEGORIES)
    other = [n for n, c in categories.items() if c == "other"]
    assert len(other) <= len(NAMES) // 5, other


def test_copies_and_sets_are_memory_whatever_their_name():
    assert categorize("[CUDA memcpy Device-to-Device]", "memcpy") == "memory copy/set"
    assert categorize("[CUDA memset]", "memset") == "memory copy/set"


@pytest.mark.parametrize(
    ("operator", "category"),
    [
        ("aten::mm", "GEMM"),
        ("aten::bmm", "GEMM"),
        ("aten::_softmax", "softmax"),
        ("aten::_log_softmax_backward_data", "softmax"),
        ("aten::mul", "elementwise"),
        ("aten::silu_backward", "elementwise"),
        ("aten::mean", "reduction"),
        ("aten::copy_", "memory copy/set"),
        ("aten::_foreach_mul_", "optimizer"),
        ("aten::view", "other"),
    ],
)
def test_cpu_operators_follow_the_same_rules(operator, category):
    assert categorize(operator, "cpu_op") == category


def test_inductor_kernels_have_their_own_category():
    # Real names from a compiled 2.7B training step on an H200.
    assert categorize("triton_poi_fused__to_copy_14") == "fused (Triton)"
    assert categorize("triton_poi_fused__unsafe_view_mul_silu_silu_backward_view_1") == "fused (Triton)"
    assert categorize("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT") == "GEMM"
