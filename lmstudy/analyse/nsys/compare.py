"""Compare the two backends on one configuration: per-range GPU totals."""

from __future__ import annotations

import pandas as pd

TOLERANCE = 0.05


def compare_ranges(nsys: pd.DataFrame, torch: pd.DataFrame, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Per range path: GPU ns per step by each backend (a range's own and its
    sub-ranges' kernels), their relative difference, and whether it is within
    `tolerance`."""

    def per_step(frame):
        steps = frame["profiled_steps"].iloc[0] if "profiled_steps" in frame else 1
        return frame.set_index("path")["gpu_ns"] / steps

    table = pd.DataFrame({"nsys_ns_per_step": per_step(nsys), "torch_ns_per_step": per_step(torch)})
    table["relative_difference"] = (table["torch_ns_per_step"] - table["nsys_ns_per_step"]) / table[
        "nsys_ns_per_step"
    ]
    table["within_tolerance"] = table["relative_difference"].abs() <= tolerance
    return table.reset_index().rename(columns={"index": "path"})
