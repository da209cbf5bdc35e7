"""Section 1, end-to-end timing: the functions that compute its tables (pandas only)."""

from __future__ import annotations

import json
import statistics

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.tables import steady_rows, steady_warmup
from lmstudy.analyse.trust import gpu_ratio, marks
from lmstudy.report.coverage import column, first_count
from lmstudy.report.labels import PASS_LABELS, interval_text, on_cpu, order_sizes, peak_words

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
    rows = steady_rows(frame)
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
            "why not measured": _why_not_measured(others),
        }
    )
    return _without_empty_reasons(table).reset_index(drop=True)


def _why_not_measured(rows: pd.DataFrame) -> pd.Series:
    """A not-applicable row's reason (its job's `error`: what the model does not allow); else ''."""
    reason = column(rows, "error").astype(object).where(rows["status"] == "not applicable", "")
    return reason.fillna("").astype(str)


def _without_empty_reasons(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns="why not measured") if (table["why not measured"] == "").all() else table


def _ms_or_status(frame: pd.DataFrame, column: str) -> pd.Series:
    shown = frame[column].astype(object)
    return shown.where(frame["status"] == "ok", frame["status"])


def _flags(rows: pd.DataFrame) -> pd.Series:
    return pd.Series([marks(r) for _, r in rows.iterrows()], index=rows.index, dtype=object)


@computes_table
def main_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Steady-state rows: the median over processes with its 95% interval, how many processes, how much
    of the step the GPU worked, and the flags (lmstudy.analyse.trust) beside the rates."""
    rows = steady_rows(frame)
    ok = rows["status"] == "ok"
    table = pd.DataFrame({
        "size": rows["size"].astype(str),
        "context": rows["context_length"],
        "pass": rows["pass"].astype(str).map(PASS_LABELS),
        "precision": rows["precision"],
        "median ms": _ms_or_status(rows, "median_ms"),
        "95% CI ms": interval_text(column(rows, "ci_low_ms"), column(rows, "ci_high_ms")).where(ok, ""),
        "processes": column(rows, "processes").where(ok),
        "spread %": column(rows, "process_spread") * 100,
        "GPU busy %": column(rows, "gpu_busy_share") * 100,
        "SM MHz": column(rows, "sm_clock_mhz"),
        "tokens/s": column(rows, "tokens_per_s"),
        "TFLOP/s": column(rows, "achieved_tflops"),
        # Each row's MFU over its own precision's datasheet peak: the table's note names it (mfu_note).
        "MFU %": column(rows, "mfu") * 100,
        "peak GiB": column(rows, "peak_allocated_bytes") / 2**30,
        "flags": _flags(rows),
        "why not measured": _why_not_measured(rows),
    })
    # A column with nothing in it (MFU, GPU busy and peak memory on a CPU; no reason where every row
    # was measured) is left out, not shown as n/a.
    keep = [c for c in table.columns if c in ("size", "context", "pass", "precision", "median ms", "flags")
            or table[c].replace("", pd.NA).notna().any()]
    return table[keep].reset_index(drop=True)


def backward_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Backward time per configuration: forward+backward minus forward, with a conservative interval
    (the difference of the two intervals' far ends) and the flags of either row."""
    rows = steady_rows(frame)
    rows = rows[rows["status"] == "ok"]
    key = ["size", "context_length", "precision", "variant"]
    forward = rows[rows["pass"] == "forward"]
    both = rows[rows["pass"] == "forward_backward"].merge(
        forward, on=key, how="inner", suffixes=("_fb", "_f")).set_index(key)
    if both.empty:
        return pd.DataFrame()
    out = pd.DataFrame(index=both.index)
    out["forward_ms"] = both["median_ms_f"]
    out["backward_ms"] = both["median_ms_fb"] - both["median_ms_f"]
    if {"ci_low_ms_f", "ci_high_ms_f"} <= set(both.columns):
        # A time is not negative: where the forward's interval reaches past the forward+backward's
        # low end (a noisy or host-bound pair), the interval starts at 0.
        out["backward_low_ms"] = (both["ci_low_ms_fb"] - both["ci_high_ms_f"]).clip(lower=0)
        out["backward_high_ms"] = both["ci_high_ms_fb"] - both["ci_low_ms_f"]
    out["backward_over_forward"] = out["backward_ms"] / out["forward_ms"]
    for flag in ("host_bound", "noisy"):
        if f"{flag}_f" in both:
            out[flag] = both[f"{flag}_f"].astype(bool) | both[f"{flag}_fb"].astype(bool)
    return out.reset_index()


@computes_table
def backward_table(backward: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame({
        "size": backward["size"].astype(str),
        "context": backward["context_length"],
        "precision": backward["precision"],
        "forward ms": backward["forward_ms"],
        "backward ms": backward["backward_ms"],
        "95% CI ms": interval_text(column(backward, "backward_low_ms"), column(backward, "backward_high_ms")),
        "backward / forward ×": backward["backward_over_forward"],
        "flags": _flags(backward),
    })
    return table.reset_index(drop=True)


def processes_steps(cell) -> list[list[float]]:
    """Each process's step times from a trajectory_ms cell (one list per process; one flat list in older
    runs); [] where the cell holds none."""
    try:
        value = json.loads(cell) if isinstance(cell, str) else []
    except ValueError:
        return []
    processes = value if value and isinstance(value[0], list) else ([value] if value else [])
    return [[float(t) for t in steps] for steps in processes if steps]


def early_over_steady(stable: pd.DataFrame, warmup: int) -> pd.DataFrame:
    """Per steady row, the steps after `warmup` warm-ups that come before the steady window (steps
    warmup+1 to top) over the steady window (steps top+1 on): the median over processes of each
    one's median ratio. The two windows share no step, so a ratio of 1 means warm, not overlap."""
    top = steady_warmup(stable)
    records = []
    for index, row in stable.iterrows():
        per_process = []
        timed = row.get("timed_steps")
        end = top + int(timed) if pd.notna(timed) else None  # not recorded: every step after the warm-up
        for steps in processes_steps(row.get("trajectory_ms")):
            early, late = steps[warmup:top], steps[top:end]
            if early and late:
                per_process.append(statistics.median(early) / statistics.median(late))
        if per_process:
            records.append({"index": index, "processes": len(per_process),
                            "early_over_steady": statistics.median(per_process)})
    return pd.DataFrame(records, columns=["index", "processes", "early_over_steady"]).set_index("index")


@computes_table
def warmup_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The first steps of a fresh process against its steady window, from windows that share no step:
    step 1 (the cold start), step 2 (after one warm-up step), steps 3 to top (after two), and the steady
    window after them; the median over processes of each. Older runs without per-step trajectories get
    each warm-up's window (mean ± std), which overlap."""
    stable = steady_rows(frame)
    stable = stable[stable["status"] == "ok"]
    top = steady_warmup(frame)
    timed = first_count(frame, "timed_steps")
    # A run that recorded no timed_steps: its steady window is every step after the warm-ups.
    end = top + timed if timed != "n/a" else None
    have = "trajectory_ms" in stable and any(
        len(p) >= (end or top + 1) for c in stable["trajectory_ms"] for p in processes_steps(c))
    if top < 2 or not have:
        return _overlapping_warmup_table(frame)
    window = f"steps {top + 1}–{end} (steady) ms" if end else f"steps {top + 1} on (steady) ms"
    windows = {"step 1 ms": (0, 1), "step 2 ms": (1, 2), f"steps 3–{top} ms": (2, top), window: (top, end)}
    if top == 2:
        windows.pop(f"steps 3–{top} ms")
    records = []
    for _, row in stable.iterrows():
        processes = processes_steps(row.get("trajectory_ms"))
        record = {"size": str(row["size"]), "context": row["context_length"],
                  "pass": PASS_LABELS.get(str(row["pass"]), row["pass"]), "precision": row["precision"]}
        for name, (a, b) in windows.items():
            values = [statistics.median(p[a:b]) for p in processes if len(p) >= (b or a + 1)]
            record[name] = statistics.median(values) if values else float("nan")
        steady = record[list(windows)[-1]]
        record["step 2 / steady ×"] = record["step 2 ms"] / steady
        if f"steps 3–{top} ms" in record:
            record[f"steps 3–{top} / steady ×"] = record[f"steps 3–{top} ms"] / steady
        record["flags"] = marks(row)
        records.append(record)
    return pd.DataFrame(records)


def _overlapping_warmup_table(frame: pd.DataFrame) -> pd.DataFrame:
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
        first = rows.groupby(index, observed=True)["first_step_ms"].first()  # the median over processes
        table.insert(0, "first step ms", first.reindex(table.index))
    table = table.reset_index()
    table["pass"] = table["pass"].map(PASS_LABELS)
    return table.rename(columns={"context_length": "context"})


def speedup_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """bf16 over fp32 speed-up of the steady median, per configuration, with a conservative interval
    (fp32's interval over bf16's, far ends) and whether either row is flagged."""
    rows = steady_rows(frame)
    rows = rows[rows["status"] == "ok"]
    index = ["size", "context_length", "pass", "variant"]
    columns = [c for c in ("median_ms", "ci_low_ms", "ci_high_ms", "host_bound", "noisy") if c in rows]
    wide = rows.pivot_table(index=index, columns="precision", values=columns, aggfunc="first", observed=True)
    if wide.empty or not {"fp32", "bf16"} <= set(wide["median_ms"].columns):
        return pd.DataFrame()
    wide = wide[wide["median_ms"][["fp32", "bf16"]].notna().all(axis=1)]
    out = pd.DataFrame(index=wide.index)
    out["fp32"], out["bf16"] = wide["median_ms"]["fp32"], wide["median_ms"]["bf16"]
    out["speedup"] = out["fp32"] / out["bf16"]
    if {"ci_low_ms", "ci_high_ms"} <= set(wide.columns.get_level_values(0)):
        out["speedup_low"] = wide["ci_low_ms"]["fp32"] / wide["ci_high_ms"]["bf16"]
        out["speedup_high"] = wide["ci_high_ms"]["fp32"] / wide["ci_low_ms"]["bf16"]
    for flag in ("host_bound", "noisy"):
        if flag in wide:
            out[flag] = wide[flag][["fp32", "bf16"]].fillna(False).astype(bool).any(axis=1)
    out = out.reset_index()
    gpu = gpu_speedups(rows, index, "fp32", "bf16")
    out = out.merge(gpu, on=index, how="left") if not gpu.empty else out
    # The device, for the words of its findings (a CPU's rows are noisy, never host-bound by launches).
    out.attrs["device"] = "cpu" if on_cpu(rows) else "gpu"
    return out


def gpu_speedups(rows: pd.DataFrame, index: list[str], slow: str, fast: str) -> pd.DataFrame:
    """`slow` precision's GPU busy time over `fast`'s per configuration (index), with the range its
    processes allow: what the GPU gains, which a host-bound step's wall time hides.
    Empty where the rows have no GPU busy time (CPU runs, runs before it was recorded)."""
    if "gpu_busy_ms" not in rows:
        return pd.DataFrame()
    by = {p: part.set_index(index) for p, part in rows.groupby("precision", observed=True)}
    if slow not in by or fast not in by:
        return pd.DataFrame()
    records = []
    for key in by[slow].index.intersection(by[fast].index):
        a, b = by[slow].loc[key], by[fast].loc[key]
        if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
            continue  # the same configuration twice: not one cell
        ratio, low, high = gpu_ratio(a, b)
        if ratio == ratio:
            records.append({**dict(zip(index, key, strict=True)), f"gpu_{slow}_ms": a["gpu_busy_ms"],
                            f"gpu_{fast}_ms": b["gpu_busy_ms"], "gpu_speedup": ratio,
                            "gpu_speedup_low": low, "gpu_speedup_high": high})
    frame = pd.DataFrame(records)
    return order_sizes(frame) if "size" in frame else frame


@computes_table
def speedup_table(speedups: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame({
        "size": speedups["size"].astype(str),
        "context": speedups["context_length"],
        "pass": speedups["pass"].astype(str).map(PASS_LABELS),
        "wall-time speed-up ×": speedups["speedup"],
        "95% CI ×": interval_text(column(speedups, "speedup_low"), column(speedups, "speedup_high")),
        # What the GPU gains, from its busy time per step: stable where the wall time is the host's.
        "GPU-time speed-up ×": column(speedups, "gpu_speedup"),
        "GPU-time range ×": interval_text(column(speedups, "gpu_speedup_low"),
                                      column(speedups, "gpu_speedup_high")),
        "flags": _flags(speedups),
    })
    keep = [c for c in table.columns
            if not c.startswith("GPU-time") or table[c].replace("", pd.NA).notna().any()]
    return table[keep].reset_index(drop=True)


@computes_table
def mfu_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = steady_rows(frame)
    rows = rows[rows["pass"] == "train_step"].copy()
    rows["MFU %"] = (rows["mfu"] * 100).astype(object).where(rows["status"] == "ok", rows["status"])
    # Which peak each row's MFU divides by, named in the row: one definition, the precision's own peak.
    rows["MFU of"] = [peak_words(rows.loc[[i]]).removeprefix("of the ") for i in rows.index]
    table = rows.pivot_table(
        index=["size", "precision", "MFU of"], columns="context_length", values="MFU %",
        aggfunc="first", observed=True,
    )
    table.columns = [f"ctx {c} (%)" for c in table.columns]
    return table.reset_index()
