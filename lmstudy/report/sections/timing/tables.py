"""Section 1, end-to-end timing: the functions that compute its tables (pandas only)."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.report.sections.labels import PASS_LABELS

KEY = ["size", "context_length", "pass", "precision", "variant"]


def study_model(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the study's model (naive attention, eager); the other variants
    (timing.variants beyond naive) have a table of their own (`variants_table`)."""
    return frame[frame["variant"] == "naive"] if "variant" in frame else frame


@computes_table
def variants_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The variants beyond naive (sdpa, -compile) at steady state, beside the naive model's median in the
    same configuration: timing.variants lists them; the optimization ladder is section 7's."""
    if "variant" not in frame:
        return pd.DataFrame()
    rows = steady(frame)
    others = rows[rows["variant"] != "naive"]
    if others.empty:
        return pd.DataFrame()
    key = ["size", "context_length", "pass", "precision"]
    naive = rows[(rows["variant"] == "naive") & (rows["status"] == "ok")].set_index(key)["median_ms"]
    naive_ms = naive.reindex(pd.MultiIndex.from_frame(others[key])).to_numpy()
    median = others["median_ms"].where(others["status"] == "ok")
    table = pd.DataFrame(
        {
            "size": others["size"].astype(str),
            "context": others["context_length"],
            "pass": others["pass"].astype(str).map(PASS_LABELS),
            "precision": others["precision"],
            "variant": others["variant"],
            "median ms": _ms_or_status(others, "median_ms"),
            "naive median ms": naive_ms,
            "speed-up vs naive ×": naive_ms / median.to_numpy(),
        }
    )
    return table.reset_index(drop=True)


def steady(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows at the largest warm-up measured: the steady-state numbers."""
    return frame[frame["warmup_steps"] == frame["warmup_steps"].max()]


def _ms_or_status(frame: pd.DataFrame, column: str) -> pd.Series:
    shown = frame[column].astype(object)
    return shown.where(frame["status"] == "ok", frame["status"])


@computes_table
def main_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = steady(frame).copy()
    rows["median ms"] = _ms_or_status(rows, "median_ms")
    rows["std ms"] = rows["std_ms"]
    rows["tokens/s"] = rows["tokens_per_s"]
    rows["TFLOP/s"] = rows["achieved_tflops"]
    rows["MFU %"] = rows["mfu"] * 100
    rows["peak GiB"] = rows["peak_allocated_bytes"] / 2**30
    values = ["median ms", "std ms", "tokens/s", "TFLOP/s", "MFU %", "peak GiB"]
    table = rows.pivot_table(
        index=["size", "context_length", "pass"], columns="precision", values=values,
        aggfunc="first", observed=True, dropna=False,
    )
    table = table.dropna(how="all")
    table.columns = [f"{precision} {value}" for value, precision in table.columns]
    ordered = [f"{p} {v}" for p in ("fp32", "bf16", "fp16") for v in values if f"{p} {v}" in table]
    # A column with nothing in it (MFU and peak memory on a CPU) is left out, not shown as n/a.
    ordered = [c for c in ordered if table[c].notna().any()]
    table = table[ordered].reset_index()
    table["pass"] = table["pass"].map(PASS_LABELS)
    return table.rename(columns={"context_length": "context"})


@computes_table
def warmup_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame.copy()
    rows["cell"] = [
        f"{m:.2f} ± {s:.2f} (CV {c:.2f})" if st == "ok" else st
        for m, s, c, st in zip(rows["mean_ms"], rows["std_ms"], rows["cv"], rows["status"], strict=True)
    ]
    index = ["size", "context_length", "pass", "precision"]
    table = rows.pivot_table(
        index=index, columns="warmup_steps", values="cell", aggfunc="first", observed=True,
    )
    table.columns = [f"warm-up {w}: mean ± std ms" for w in table.columns]
    if "first_step_ms" in rows:
        # The fresh process's first step: the cold start's cost in one number.
        first = rows.groupby(index, observed=True)["first_step_ms"].first()
        table.insert(0, "first step ms", first.reindex(table.index))
    table = table.reset_index()
    table["pass"] = table["pass"].map(PASS_LABELS)
    return table.rename(columns={"context_length": "context"})


def speedup_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """bf16 over fp32 speed-up of the steady median, per configuration."""
    rows = steady(frame)
    rows = rows[rows["status"] == "ok"]
    wide = rows.pivot_table(
        index=["size", "context_length", "pass", "variant"], columns="precision",
        values="median_ms", aggfunc="first", observed=True,
    )
    if not {"fp32", "bf16"} <= set(wide.columns):
        return pd.DataFrame()
    wide = wide.dropna(subset=["fp32", "bf16"])
    wide["speedup"] = wide["fp32"] / wide["bf16"]
    return wide.reset_index()


@computes_table
def speedup_table(speedups: pd.DataFrame) -> pd.DataFrame:
    table = speedups.pivot_table(
        index=["size", "context_length"], columns="pass", values="speedup",
        aggfunc="first", observed=True,
    )
    table.columns = [f"{PASS_LABELS[p]} ×" for p in table.columns]
    return table.reset_index().rename(columns={"context_length": "context"})


@computes_table
def mfu_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = steady(frame)
    rows = rows[rows["pass"] == "train_step"].copy()
    rows["MFU %"] = (rows["mfu"] * 100).astype(object).where(rows["status"] == "ok", rows["status"])
    table = rows.pivot_table(
        index=["size", "precision"], columns="context_length", values="MFU %",
        aggfunc="first", observed=True,
    )
    table.columns = [f"ctx {c}" for c in table.columns]
    return table.reset_index()
