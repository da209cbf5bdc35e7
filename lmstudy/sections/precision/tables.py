"""Section 3, mixed precision: accumulation, autocast dtypes, bf16 speed-ups.

The functions that compute its tables (pandas only).
"""

from __future__ import annotations

import re

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


LOW_DTYPES = ("float16", "bfloat16")
# A module path's index among repeated blocks (layers.0, layers.11): the report shows the blocks once.
_INDEX = re.compile(r"(?<=[ .])\d+(?=[ .]|$)")


def _kind(tensor: str) -> str:
    if tensor.startswith("parameter "):
        return "parameters"
    if tensor.startswith("gradient of "):
        return "gradients"
    return _INDEX.sub("*", tensor)


def _summary(dtypes: pd.Series) -> str:
    """One dtype where all agree, else each with how many tensors have it ("float32 ×11, bfloat16 ×1")."""
    counts = dtypes.value_counts(sort=False)
    return counts.index[0] if len(counts) == 1 else ", ".join(f"{d} ×{n}" for d, n in counts.items())


def collapsed_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """The study model's dtype rows (precision/model_dtypes.csv), one per precision and kind of tensor:
    every parameter in one row, every gradient in one, each module path once for all its repeated
    blocks (layers.* for layers.0, layers.1, ...), in the order the model ran them; `tensors` counts
    the tensors a row stands for, `dtype` is their dtype (or each dtype with its count), `lowered`
    whether every one of them is fp16 or bf16."""
    rows = frame[frame["tensor"] != "(all)"]
    if rows.empty:
        return pd.DataFrame(columns=["precision", "tensor", "tensors", "dtype", "lowered"])
    rows = rows.assign(kind=rows["tensor"].map(_kind))
    grouped = rows.groupby(["precision", "kind"], sort=False)["dtype"]
    out = pd.DataFrame({"tensors": grouped.size(), "dtype": grouped.apply(_summary),
                        "lowered": grouped.apply(lambda d: bool(d.isin(LOW_DTYPES).all()))}).reset_index()
    counts = out["tensors"].astype(str)
    out["tensor"] = out["kind"].where(~out["kind"].isin(["parameters", "gradients"]),
                                      "all " + counts + " " + out["kind"])
    return out[["precision", "kind", "tensor", "tensors", "dtype", "lowered"]]


@computes_table
def model_dtype_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The study model's dtypes: one row per kind of tensor (collapsed_dtypes), one column per autocast
    dtype; 'not run' with its reason."""
    collapsed = collapsed_dtypes(frame)
    order = list(dict.fromkeys(collapsed["kind"]))
    first = collapsed.drop_duplicates("kind").set_index("kind")
    table = pd.DataFrame({"tensor": [first.loc[k, "tensor"] for k in order],
                          "tensors": [int(first.loc[k, "tensors"]) for k in order]})
    for precision in PRECISIONS:
        part = frame[frame["precision"] == precision]
        if part.empty:
            continue
        if (part["dtype"] == "not run").all():
            table[f"{precision} autocast"] = f"not run: {part['note'].iloc[0]}"
            continue
        dtypes = collapsed[collapsed["precision"] == precision].set_index("kind")["dtype"]
        table[f"{precision} autocast"] = [dtypes.get(k, "") for k in order]
    if table.empty and len(frame):
        reasons = frame.drop_duplicates("precision")
        table = pd.DataFrame({"tensor": ["(all)"], "tensors": [0]})
        for row in reasons.itertuples():
            table[f"{row.precision} autocast"] = f"not run: {row.note}"
    return table
