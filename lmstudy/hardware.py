"""Datasheet dense peak rates of known GPUs, for MFU.

Dense (no structured sparsity) TFLOP/s from NVIDIA's datasheets. A GPU is
found by its exact name, as torch.cuda.get_device_name() reports it: an L40
is not an L4, an A10G is not an A10, an H200 NVL is not an H200. An
unknown GPU gets no peak, so its MFU stays empty rather than guessed.
"""

from __future__ import annotations

NAN = float("nan")
# name -> (bf16 tensor, tf32 tensor, fp32 without tensor cores)
PEAKS: dict[str, tuple[float, float, float]] = {
    "NVIDIA H100 80GB HBM3": (989.4, 494.7, 66.9),  # SXM5
    "NVIDIA H100 PCIe": (756.0, 378.0, 51.2),
    "NVIDIA H100 NVL": (835.0, 417.5, 60.0),
    "NVIDIA H200": (989.4, 494.7, 66.9),  # SXM
    "NVIDIA GH200 480GB": (989.4, 494.7, 66.9),
    "NVIDIA H800": (989.4, 494.7, 66.9),
    "NVIDIA B200": (2250.0, 1100.0, 80.0),
    "NVIDIA A100-SXM4-80GB": (312.0, 156.0, 19.5),
    "NVIDIA A100-SXM4-40GB": (312.0, 156.0, 19.5),
    "NVIDIA A100 80GB PCIe": (312.0, 156.0, 19.5),
    "NVIDIA A100-PCIE-40GB": (312.0, 156.0, 19.5),
    "NVIDIA A800-SXM4-80GB": (312.0, 156.0, 19.5),
    "NVIDIA L40S": (362.05, 183.0, 91.6),
    "NVIDIA L40": (181.05, 90.5, 90.5),
    "NVIDIA L4": (121.0, 60.0, 30.3),
    "NVIDIA A10": (125.0, 62.5, 31.2),
    "NVIDIA GeForce RTX 4090": (165.2, 82.6, 82.6),
    "NVIDIA GeForce RTX 5090": (209.5, 104.8, 104.8),
    "NVIDIA GeForce RTX 3090": (71.0, 35.6, 35.6),
    "Tesla V100-SXM2-16GB": (NAN, NAN, 15.7),  # no bf16, no TF32
    "Tesla V100-SXM2-32GB": (NAN, NAN, 15.7),
    "Tesla V100-PCIE-16GB": (NAN, NAN, 14.0),
    "Tesla V100-PCIE-32GB": (NAN, NAN, 14.0),
}


def peak_tflops(device_name: str, precision: str, tf32: bool) -> float | None:
    """Dense peak TFLOP/s of the unit that `precision` runs on, or None."""
    if precision not in ("bf16", "fp16", "fp32"):
        raise ValueError(f"unknown precision {precision!r}")
    rates = PEAKS.get(device_name.strip())
    if rates is None:
        return None
    bf16, tf32_rate, fp32 = rates
    # fp16 and bf16 run on the same tensor cores at the same dense rate on every GPU listed.
    rate = bf16 if precision in ("bf16", "fp16") else tf32_rate if tf32 else fp32
    return None if rate != rate else rate
