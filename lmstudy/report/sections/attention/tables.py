"""Section 5, attention alone: tables, figures, memory accounting and findings.

The functions that compute its tables (pandas only).
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.attention_memory import fit_constant_plus_power, naive_memory_accounting, predicted_bytes
from lmstudy.analyse.computed import computes_table

IMPLEMENTATIONS = ("naive", "naive-compile", "sdpa")


LABELS = {"naive": "naive eager", "naive-compile": "naive compiled", "sdpa": "SDPA"}


MIB = 2**20


GIB = 2**30


def _config(row) -> str:
    return f"d={int(row['head_dim'])}, seq {int(row['seq_len'])}"


def _or_status(frame: pd.DataFrame, column: str, scale: float = 1.0) -> pd.Series:
    values = (frame[column] / scale).astype(object) if column in frame else pd.Series(None, frame.index)
    return values.where(frame["status"] == "ok", frame["status"])


@computes_table
def main_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame.copy()
    rows["fwd ms"] = _or_status(rows, "forward_median_ms")
    rows["bwd ms"] = _or_status(rows, "backward_median_ms")
    rows["MiB before bwd"] = _or_status(rows, "memory_before_backward_bytes", MIB)
    values = ["fwd ms", "bwd ms", "MiB before bwd"]
    table = rows.pivot_table(
        index=["precision", "head_dim", "seq_len"],
        columns="implementation",
        values=values,
        aggfunc="first",
        observed=True,
        dropna=False,
    ).dropna(how="all")
    table.columns = [f"{LABELS[impl]} {value}" for value, impl in table.columns]
    ordered = [f"{LABELS[i]} {v}" for i in IMPLEMENTATIONS for v in values if f"{LABELS[i]} {v}" in table]
    table = table[ordered].reset_index()
    return table.rename(columns={"head_dim": "d", "seq_len": "seq"})


@computes_table
def backend_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[(frame["implementation"] == "sdpa") & (frame["status"] == "ok")]
    if rows.empty:
        return pd.DataFrame()
    table = rows.pivot_table(
        index=["precision", "head_dim"], columns="seq_len", values="sdpa_backend", aggfunc="first"
    )
    table.columns = [f"seq {s}" for s in table.columns]
    return table.reset_index().rename(columns={"head_dim": "d"})


def ratio_frame(frame: pd.DataFrame, slow: str, fast: str) -> pd.DataFrame:
    """Forward+backward time of `slow` over `fast`, where both ran."""
    ok = frame[frame["status"] == "ok"]
    wide = ok.pivot_table(
        index=["precision", "head_dim", "seq_len"],
        columns="implementation",
        values=["forward_median_ms", "backward_median_ms", "total_ms"],
        aggfunc="first",
        observed=True,
    )
    if ("total_ms", slow) not in wide or ("total_ms", fast) not in wide:
        return pd.DataFrame()
    out = pd.DataFrame(
        {
            "forward": wide[("forward_median_ms", slow)] / wide[("forward_median_ms", fast)],
            "backward": wide[("backward_median_ms", slow)] / wide[("backward_median_ms", fast)],
            "total": wide[("total_ms", slow)] / wide[("total_ms", fast)],
        }
    ).dropna()
    return out.reset_index()


@computes_table
def compile_table(frame: pd.DataFrame) -> pd.DataFrame:
    """naive compiled vs eager: speed-ups and the first call's excess (the compile)."""
    ratios = ratio_frame(frame, "naive", "naive-compile")
    if ratios.empty:
        return ratios
    compiled = frame[(frame["implementation"] == "naive-compile") & (frame["status"] == "ok")]
    excess = compiled.set_index(["precision", "head_dim", "seq_len"])
    excess = (excess["first_call_ms"] - excess["total_ms"]) / 1e3
    ratios = ratios.set_index(["precision", "head_dim", "seq_len"])
    ratios["compile s"] = excess
    ratios = ratios.reset_index().rename(
        columns={
            "head_dim": "d",
            "seq_len": "seq",
            "forward": "forward ×",
            "backward": "backward ×",
            "total": "forward+backward ×",
        }
    )
    return ratios


def _smallest_oom(frame: pd.DataFrame):
    """The smallest OOM configuration of the naive implementations, eager first."""
    for impl in ("naive", "naive-compile"):
        oom = frame[(frame["implementation"] == impl) & (frame["status"] == "OOM")]
        if len(oom):
            return oom.sort_values(["seq_len", "head_dim", "precision"]).iloc[0]
    return None


def _largest_fit(frame: pd.DataFrame, precision: str):
    ok = frame[
        (frame["implementation"] == "naive") & (frame["status"] == "ok") & (frame["precision"] == precision)
    ]
    if ok.empty:
        return None
    return ok.sort_values(["predicted_before_backward_bytes", "seq_len", "head_dim"]).iloc[-1]


@computes_table
def accounting_table(row) -> pd.DataFrame:
    items = naive_memory_accounting(
        int(row["batch_size"]), int(row["seq_len"]), int(row["head_dim"]), row["precision"]
    )
    table = pd.DataFrame(items)
    table["MiB"] = table["bytes"] / MIB
    table["saved for backward"] = table["saved"].map({True: "yes", False: ""})
    return table[["tensor", "shape", "dtype", "held", "saved for backward", "MiB"]]


def workspace_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Per configuration both ran: naive's and SDPA's inputs_bytes and their difference in MiB (none where
    the rows lack inputs_bytes or either implementation): what cublas_workspace_bytes takes the median of."""
    ok = frame[frame["status"] == "ok"]
    if "inputs_bytes" not in ok:
        return pd.DataFrame()
    wide = ok.pivot_table(
        index=["precision", "head_dim", "seq_len"], columns="implementation", values="inputs_bytes",
        aggfunc="first", observed=True,
    )
    if "naive" not in wide or "sdpa" not in wide:
        return pd.DataFrame()
    pairs = pd.DataFrame({"naive_inputs_bytes": wide["naive"], "sdpa_inputs_bytes": wide["sdpa"]}).dropna()
    pairs["difference_bytes"] = pairs["naive_inputs_bytes"] - pairs["sdpa_inputs_bytes"]
    return pairs.reset_index()


def cublas_workspace_bytes(frame: pd.DataFrame) -> float:
    """What naive attention's inputs hold beyond SDPA's at the same configuration (median; NaN if unknown).

    Both measure the allocated memory before a forward with the same q, k, v
    and upstream gradient in place; naive's matmuls have by then made cuBLAS
    keep its workspace (a constant, 64 MiB on an H100 or H200), SDPA's flash
    kernel calls no cuBLAS. So the difference is that workspace, measured.
    """
    pairs = workspace_pairs(frame)
    if pairs.empty:
        return float("nan")
    return float(pairs["difference_bytes"].median())


@computes_table
def memory_fit_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Memory in use before the backward fitted as constant + a * seq^k, per implementation, precision, d.

    Only where at least three sequence lengths ran (three unknowns).
    """
    ok = frame[(frame["status"] == "ok")].dropna(subset=["memory_before_backward_bytes"])
    rows = []
    for (impl, precision, d), line in ok.groupby(["implementation", "precision", "head_dim"], observed=True):
        fit = fit_constant_plus_power(line["seq_len"], line["memory_before_backward_bytes"])
        if fit is None:
            continue
        rows.append(
            {
                "implementation": LABELS[impl],
                "precision": precision,
                "d": int(d),
                "seq from": int(line["seq_len"].min()),
                "seq to": int(line["seq_len"].max()),
                "constant MiB": fit["constant"] / MIB,
                "exponent of the growing part": fit["exponent"],
                "largest misfit %": fit["max_relative_residual"] * 100,
            }
        )
    return pd.DataFrame(rows)


def _measured_vs_predicted(row, workspace: float = float("nan")) -> pd.DataFrame:
    """Measured against predicted, and measured less the cuBLAS workspace (the accounting leaves it out)."""
    measured = [row.get("memory_before_backward_bytes"), row.get("peak_bytes")]
    predicted = [row["predicted_before_backward_bytes"], row["predicted_peak_bytes"]]
    measured = [m / MIB if m is not None and m == m else None for m in measured]
    table = pd.DataFrame(
        {
            "quantity": ["in use before the backward", "peak (forward and backward)"],
            "predicted MiB": [p / MIB for p in predicted],
            "measured MiB": measured,
        }
    )
    if workspace == workspace:
        table["measured less the cuBLAS workspace MiB"] = [
            m - workspace / MIB if m is not None else None for m in measured
        ]
    return table


def oom_threshold(
    batch: int, head_dim: int, precision: str, memory_bytes: float, workspace: float = 0.0
) -> int:
    """The smallest power-of-two sequence length whose predicted peak + `workspace` exceeds memory_bytes."""
    seq = 256
    while predicted_bytes(batch, seq, head_dim, precision)["peak"] + workspace <= memory_bytes:
        seq *= 2
    return seq
