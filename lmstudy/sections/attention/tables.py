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


def _interval(rows: pd.DataFrame, part: str) -> pd.Series:
    """A part's 95% interval between processes as text, its host-bound (†) and noisy (‡) marks beside it."""
    low, high = rows.get(f"{part}_ci_low_ms"), rows.get(f"{part}_ci_high_ms")
    if low is None or high is None:
        return pd.Series("", index=rows.index, dtype=object)
    noisy = rows.get(f"{part}_noisy", pd.Series(False, index=rows.index)).fillna(False).astype(bool)
    host = rows.get(f"{part}_host_bound", pd.Series(False, index=rows.index)).fillna(False).astype(bool)
    marks = [("†" if h else "") + ("‡" if n else "") for h, n in zip(host, noisy, strict=True)]
    return pd.Series([f"{lo:.3g}–{hi:.3g}" + (f" {m}" if m else "") if pd.notna(lo) and pd.notna(hi) else ""
                      for lo, hi, m in zip(low, high, marks, strict=True)],
                     index=rows.index, dtype=object)


@computes_table
def main_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per precision, d and seq: each implementation's forward and backward median with its 95% interval
    between processes (†: host-bound, the GPU busy for less than noise.min_gpu_busy of the part; ‡: noisy,
    the processes' medians differ by more than noise.max_spread) and the
    memory in use before the backward."""
    rows = frame.copy()
    rows["fwd ms"] = _or_status(rows, "forward_median_ms")
    rows["fwd 95% CI ms"] = _interval(rows, "forward")
    rows["bwd ms"] = _or_status(rows, "backward_median_ms")
    rows["bwd 95% CI ms"] = _interval(rows, "backward")
    rows["MiB before bwd"] = _or_status(rows, "memory_before_backward_bytes", MIB)
    values = ["fwd ms", "fwd 95% CI ms", "bwd ms", "bwd 95% CI ms", "MiB before bwd"]
    if not (rows["fwd 95% CI ms"] != "").any():
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
    """Forward, backward and forward+backward time of `slow` over `fast`, where both ran; where the rows
    have intervals, each ratio's interval (far ends: slow's low over fast's high, ...; forward+backward
    from the sums of the parts' bounds) and whether the two sides are told apart (`<part>_apart`:
    their intervals do not overlap)."""
    ok = frame[frame["status"] == "ok"].copy()
    bounds = []
    for part in ("forward", "backward"):
        if {f"{part}_ci_low_ms", f"{part}_ci_high_ms"} <= set(ok):
            bounds += [f"{part}_ci_low_ms", f"{part}_ci_high_ms"]
    if len(bounds) == 4:
        ok["total_ci_low_ms"] = ok["forward_ci_low_ms"] + ok["backward_ci_low_ms"]
        ok["total_ci_high_ms"] = ok["forward_ci_high_ms"] + ok["backward_ci_high_ms"]
        bounds += ["total_ci_low_ms", "total_ci_high_ms"]
    wide = ok.pivot_table(
        index=["precision", "head_dim", "seq_len"],
        columns="implementation",
        values=["forward_median_ms", "backward_median_ms", "total_ms", *bounds],
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
    if len(bounds) == 6:
        for part in ("forward", "backward", "total"):
            low = wide[(f"{part}_ci_low_ms", slow)] / wide[(f"{part}_ci_high_ms", fast)]
            high = wide[(f"{part}_ci_high_ms", slow)] / wide[(f"{part}_ci_low_ms", fast)]
            out[f"{part}_low"], out[f"{part}_high"] = low.reindex(out.index), high.reindex(out.index)
            # Apart where the ratio's whole interval lies on one side of 1: the intervals do not overlap.
            out[f"{part}_apart"] = (out[f"{part}_low"] > 1) | (out[f"{part}_high"] < 1)
    return out.reset_index()


def ratio_words(row, part: str) -> str:
    """'24.86× faster (interval 11.9–52×)', or 'not told apart (0.57×, interval 0.1–2.6×)'."""
    from lmstudy.report.labels import faster

    ratio = row[part]
    low, high = row.get(f"{part}_low"), row.get(f"{part}_high")
    if low is None or pd.isna(low):
        return faster(ratio)
    interval = f"interval {low:.3g}–{high:.3g}×"
    if row[f"{part}_apart"]:
        return f"{faster(ratio)} ({interval})"
    return f"not told apart ({ratio:.2f}×, {interval})"


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
    for part in ("forward", "backward", "total"):
        if f"{part}_low" in ratios:
            ratios[f"{part} interval"] = [
                f"{lo:.3g}–{hi:.3g}" + ("" if apart else " (overlap)")
                for lo, hi, apart in zip(ratios[f"{part}_low"], ratios[f"{part}_high"],
                                         ratios[f"{part}_apart"], strict=True)]
    ratios = ratios.drop(columns=[c for c in ratios.columns if c.endswith(("_low", "_high", "_apart"))])
    order = [c for c in ("forward", "forward interval", "backward", "backward interval", "total",
                         "total interval", "compile s") if c in ratios.columns]
    ratios = ratios.reset_index()[["precision", "head_dim", "seq_len", *order]].rename(
        columns={
            "head_dim": "d",
            "seq_len": "seq",
            "forward": "forward ×",
            "forward interval": "forward 95% CI ×",
            "backward": "backward ×",
            "backward interval": "backward 95% CI ×",
            "total": "forward+backward ×",
            "total interval": "forward+backward 95% CI ×",
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
    return pd.DataFrame(rows, columns=["implementation", "precision", "d", "seq from", "seq to",
                                       "constant MiB", "exponent of the growing part", "largest misfit %"])


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
