"""Datasheet dense peak rates of known GPUs, for MFU.

Dense (no structured sparsity) TFLOP/s from NVIDIA's datasheets. An unknown
GPU gets no peak, so its MFU stays empty rather than guessed.
"""

from __future__ import annotations

# Matched in order against torch.cuda.get_device_name(); the first whose
# every word is in the name wins, so specific entries come first.
# (name words, bf16 tensor, tf32 tensor, fp32 without tensor cores)
_PEAKS: tuple[tuple[tuple[str, ...], float, float, float], ...] = (
    (("H100", "PCIe"), 756.0, 378.0, 51.2),
    (("H100", "NVL"), 835.0, 417.5, 60.0),
    (("H100",), 989.4, 494.7, 66.9),  # SXM5 (H100 80GB HBM3)
    (("H200",), 989.4, 494.7, 66.9),
    (("GH200",), 989.4, 494.7, 66.9),
    (("H800",), 989.4, 494.7, 66.9),
    (("B200",), 2250.0, 1100.0, 80.0),
    (("A100",), 312.0, 156.0, 19.5),
    (("A800",), 312.0, 156.0, 19.5),
    (("L40S",), 362.05, 183.0, 91.6),
    (("L4",), 121.0, 60.0, 30.3),
    (("A10",), 125.0, 62.5, 31.2),
    (("RTX", "4090"), 165.2, 82.6, 82.6),
    (("RTX", "5090"), 209.5, 104.8, 104.8),
    (("RTX", "3090"), 71.0, 35.6, 35.6),
    (("V100",), float("nan"), float("nan"), 15.7),
)


def peak_tflops(device_name: str, precision: str, tf32: bool) -> float | None:
    """Dense peak TFLOP/s of the unit that `precision` runs on, or None."""
    for words, bf16, tf32_rate, fp32 in _PEAKS:
        if all(word in device_name for word in words):
            if precision == "bf16":
                rate = bf16
            elif precision == "fp32":
                rate = tf32_rate if tf32 else fp32
            else:
                raise ValueError(f"unknown precision {precision!r}")
            return None if rate != rate else rate
    return None
