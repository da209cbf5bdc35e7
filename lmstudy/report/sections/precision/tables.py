"""Section 3, mixed precision: accumulation, autocast dtypes, bf16 speed-ups.

The functions that compute its tables (pandas only).
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.computed import computes_table

PRECISIONS = ("fp16", "bf16")


@computes_table
def accumulation_table(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": frame["method"],
            "accumulator": frame["accumulator_dtype"],
            "increment": frame["increment_dtype"],
            "0.01 as stored": frame["increment_as_stored"].map(lambda v: f"{v:.8f}"),
            "result": frame["result"].map(lambda v: f"{v:.6f}"),
            "absolute error": frame["abs_error"],
            "relative error": frame["rel_error"],
        }
    )


@computes_table
def dtype_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per tensor, one column per autocast dtype; 'not run' with its reason."""
    tensors = list(dict.fromkeys(frame.loc[frame["tensor"] != "(all)", "tensor"]))
    table = pd.DataFrame({"tensor": tensors})
    for precision in PRECISIONS:
        part = frame[frame["precision"] == precision]
        if part.empty:
            continue
        if (part["dtype"] == "not run").all():
            reason = part["note"].iloc[0]
            table[f"{precision} autocast"] = f"not run: {reason}"
        else:
            table[f"{precision} autocast"] = table["tensor"].map(part.set_index("tensor")["dtype"])
    return table
