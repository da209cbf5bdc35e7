"""Section 4, memory: peaks, memory by kind, timelines and largest allocations.

The functions that compute its tables (pandas only).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.memory.kinds import KINDS
from lmstudy.report.coverage import column, recorded
from lmstudy.report.labels import PASS_LABELS

KIND_LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "autocast_cache": "autocast's weight copies",
    "activations": "activations (from forward)",
    "temporaries": "temporaries (backward, optimizer)",
    "other": "other (inputs, buffers, cuBLAS workspace)",
    "before_recording": "before recording (unidentified)",
    "allocator_rounding": "allocator rounding (blocks beyond requests)",
}


GIB = 2**30


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with a snapshot to analyze (ok, or OOM during the recorded step)."""
    if "peak_bytes" not in frame:
        return frame.iloc[0:0]
    return frame[frame["peak_bytes"].notna()]


def _label(row) -> str:
    return f"{row['size']} ctx {row['context_length']} {PASS_LABELS[row['pass']]} {row['precision']}"


@computes_table
def peak_table(frame: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "size": frame["size"],
            "context": frame["context_length"],
            "pass": frame["pass"].map(PASS_LABELS),
            "precision": frame["precision"],
            "status": frame["status"],
            "peak GiB (snapshot)": column(frame, "peak_bytes") / GIB,
            "max_memory_allocated GiB": column(frame, "max_memory_allocated") / GIB,
            "difference %": column(frame, "peak_vs_allocator") * 100,
            "peak in phase": column(frame, "peak_phase"),
        }
    )
    if "stage" in frame:
        oom = frame["status"] == "OOM"
        table.loc[oom, "status"] = "OOM in " + frame.loc[oom, "stage"].astype(str)
    return table


@computes_table
def kinds_table(rows: pd.DataFrame) -> pd.DataFrame:
    kinds = [k for k in KINDS if f"{k}_bytes" in rows and rows[f"{k}_bytes"].fillna(0).any()]
    table = pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            "pass": rows["pass"].map(PASS_LABELS),
            "precision": rows["precision"],
        }
    )
    for kind in kinds:
        table[f"{KIND_LABELS[kind]} GiB"] = rows[f"{kind}_bytes"] / GIB
    table["total GiB"] = rows["peak_bytes"] / GIB
    return table


RESIDUAL = ("residual_stream_bytes", "batch_size", "d_model", "residual_dtype")


def residual_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows whose residual-stream size was recorded, with what it is the product of (RESIDUAL)."""
    for name in RESIDUAL:
        rows = recorded(rows, name)
    return rows


@computes_table
def residual_table(rows: pd.DataFrame) -> pd.DataFrame:
    rows = residual_rows(rows)
    rows = rows.drop_duplicates(["size", "context_length", "precision"])
    return pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            "precision": rows["precision"],
            "batch": column(rows, "batch_size"),
            "d_model": column(rows, "d_model"),
            "residual dtype (observed)": column(rows, "residual_dtype"),
            "one residual-stream activation MiB": column(rows, "residual_stream_bytes") / 2**20,
        }
    )


@computes_table
def largest_table(results: Path, row, top: int = 5) -> pd.DataFrame:
    if pd.isna(row.get("summary_dir")):
        return pd.DataFrame()
    path = results / row["summary_dir"] / "largest_allocations.csv"
    frame = result_files.read_csv(path, missing_ok=True).head(top)
    if frame.empty:
        return frame
    no_frame = (
        "(no Python frame: made in C++ by autograd, as the backward of a forward operation; the snapshot "
        "records Python frames only)"
    )
    table = pd.DataFrame(
        {
            # The allocator's block (a request rounded up by the caching allocator) beside
            # what the tensor asked for: 40 MiB of block for the 39.06 MiB of a logits tensor.
            "block MiB": frame["size_bytes"] / 2**20,
            **({"requested MiB": frame["requested_bytes"] / 2**20} if "requested_bytes" in frame else {}),
            "count": frame["count"],
            "phase": column(frame, "phases"),
            "kind": column(frame, "kinds"),
        }
    )
    if "code" in frame:
        # The operation itself, the line of code that made the block: what a reader looks for.
        table["operation (the code at that line)"] = frame["code"].astype(object).fillna("")
    table["made by (innermost user frames)"] = column(frame, "stack").astype(object).fillna(no_frame)
    return table


PHASE_ORDER = ("forward", "backward", "optimizer")


@computes_table
def phase_peak_table(results: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """The peak of each phase of each snapshot, from its timeline: a training step's peak sits in
    one phase (the optimizer's, for AdamW), and the forward phase's beside it shows what context
    does to the activations that the step's peak hides."""
    out = []
    for _, row in rows.iterrows():
        if pd.isna(row.get("summary_dir")):
            continue  # no summary of this snapshot was recorded
        path = results / row["summary_dir"] / "timeline.csv"
        line = result_files.read_csv(path, missing_ok=True)
        if line.empty:
            continue
        by_phase = line.groupby("phase")["allocated_bytes"].max()
        record = {
            "size": row["size"],
            "context": row["context_length"],
            "pass": PASS_LABELS[row["pass"]],
            "precision": row["precision"],
            "at start GiB": line["allocated_bytes"].iloc[0] / GIB,
        }
        for phase in PHASE_ORDER:
            if phase in by_phase:
                record[f"{phase} peak GiB"] = by_phase[phase] / GIB
        record["step peak GiB"] = row["peak_bytes"] / GIB
        record["peak in phase"] = row.get("peak_phase")
        out.append(record)
    return pd.DataFrame(out)
