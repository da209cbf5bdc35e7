"""How far to trust a timing row: flags, intervals that overlap, and the physics a table must obey.

- host-bound: the GPU was busy for less than `min_gpu_busy` of the step
  (the rest is launch overhead and Python), so the wall time measures the
  host, which moves from process to process;
- noisy: the fresh processes' medians spread by more than `max_spread`;
- physics: a training step takes at least as long as forward+backward, and
  forward+backward at least as long as forward. A table that says otherwise
  shows noise, never a finding.

Findings use trusted rows (neither flag) and never rank two values whose
intervals overlap. pandas only.
"""

from __future__ import annotations

import json

import pandas as pd

FLAG_MARKS = {"host_bound": "†", "noisy": "‡"}
FLAG_MEANINGS = {
    "host_bound": "host-bound: the GPU worked for less than {min_gpu_busy:.0%} of the step, so the time "
                  "measures the host's launches and Python and moves from process to process",
    "noisy": "noisy: the fresh processes' medians still differ by more than {max_spread:.0%}",
}
# pass -> the pass it contains (its time is at least that one's)
CONTAINS = {"train_step": "forward_backward", "forward_backward": "forward"}


def flag_rows(frame: pd.DataFrame, min_gpu_busy: float, max_spread: float) -> pd.DataFrame:
    """`frame` with boolean host_bound and noisy columns (False where the data cannot tell).

    Any table of step times: the GPU's share comes from gpu_busy_share, else gpu_busy_ms over
    median_ms (compile and ladder rows); a table of two timed parts (attention's forward_ and
    backward_ columns) gets each part's noisy and host-bound flags too (a part's GPU busy time over its
    median), and is noisy or host-bound where either part is."""
    frame = frame.copy()
    if "gpu_busy_share" not in frame and {"gpu_busy_ms", "median_ms"} <= set(frame):
        frame["gpu_busy_share"] = (pd.to_numeric(frame["gpu_busy_ms"], errors="coerce")
                                   / pd.to_numeric(frame["median_ms"], errors="coerce"))
    busy = pd.to_numeric(frame["gpu_busy_share"], errors="coerce") if "gpu_busy_share" in frame else None
    ok = frame["status"] == "ok" if "status" in frame else True
    frame["host_bound"] = (busy < min_gpu_busy).fillna(False) & ok if busy is not None else False
    if "gpu" in frame:
        # A CPU has no GPU busy time (what a profiler reads there is its operators' time): never host-bound.
        frame["host_bound"] = frame["host_bound"] & ~frame["gpu"].astype(str).str.startswith("cpu")
    frame["noisy"] = False
    for part in ("forward_", "backward_"):
        if {f"{part}gpu_busy_ms", f"{part}median_ms"} <= set(frame):
            share = (pd.to_numeric(frame[f"{part}gpu_busy_ms"], errors="coerce")
                     / pd.to_numeric(frame[f"{part}median_ms"], errors="coerce"))
            frame[f"{part}host_bound"] = (share < min_gpu_busy).fillna(False) & ok
            frame["host_bound"] = frame["host_bound"] | frame[f"{part}host_bound"]
    for part in ("", "forward_", "backward_"):
        if f"{part}process_spread" in frame:
            spread = pd.to_numeric(frame[f"{part}process_spread"], errors="coerce")
            noisy = (spread > max_spread).fillna(False) & ok
            if part:
                frame[f"{part}noisy"] = noisy
            frame["noisy"] = frame["noisy"] | noisy
    # The thresholds travel with the rows, so that the report names the values it flagged by.
    frame["min_gpu_busy"] = min_gpu_busy
    frame["max_spread"] = max_spread
    return frame


def thresholds(frame: pd.DataFrame) -> dict[str, float]:
    """The flags' thresholds the rows were flagged by ({} for rows flagged before they travelled)."""
    found = {}
    for name in ("min_gpu_busy", "max_spread"):
        values = pd.to_numeric(frame[name], errors="coerce").dropna() if name in frame else pd.Series()
        if len(values):
            found[name] = float(values.iloc[0])
    return found


def gpu_busy_processes(row) -> list[float]:
    """A row's GPU busy time per process (gpu_busy_ms_processes, a JSON list), else its one gpu_busy_ms
    (runs from before the list existed profiled the first process only); [] where neither is known."""
    listed = row.get("gpu_busy_ms_processes")
    if isinstance(listed, str) and listed.strip():
        try:
            values = [float(v) for v in json.loads(listed) if v is not None]
        except (TypeError, ValueError):
            values = []
        values = [v for v in values if v == v and v > 0]
        if values:
            return values
    busy = pd.to_numeric(pd.Series([row.get("gpu_busy_ms")]), errors="coerce").iloc[0]
    return [float(busy)] if pd.notna(busy) and busy > 0 else []


def gpu_ratio(slow, fast) -> tuple[float, float, float]:
    """slow's GPU busy time over fast's (a speed-up on the GPU), with the range the processes allow:
    the extremes of one side's processes over the other's. NaNs where either lacks a busy time.

    GPU time is the measure of what the GPU does: it moves by a fraction of a percent between
    processes where the wall time of a host-bound step moves by tens of percent."""
    a, b = gpu_busy_processes(slow), gpu_busy_processes(fast)
    nan = float("nan")
    if not a or not b:
        return nan, nan, nan
    busy_a = pd.to_numeric(pd.Series([slow.get("gpu_busy_ms")]), errors="coerce").iloc[0]
    busy_b = pd.to_numeric(pd.Series([fast.get("gpu_busy_ms")]), errors="coerce").iloc[0]
    ratio = (busy_a / busy_b) if pd.notna(busy_a) and pd.notna(busy_b) and busy_b > 0 else (
        pd.Series(a).median() / pd.Series(b).median())
    return float(ratio), min(a) / max(b), max(a) / min(b)


def gpu_spread(rows: pd.DataFrame) -> float:
    """The largest relative spread (max/min - 1) of the GPU busy time between the processes of any
    row; NaN where no row has more than one process's busy time."""
    spreads = [max(v) / min(v) - 1 for _, r in rows.iterrows() if len(v := gpu_busy_processes(r)) > 1]
    return max(spreads) if spreads else float("nan")


def marks(row) -> str:
    """The marks of a row's flags, e.g. '†‡'."""
    return "".join(mark for flag, mark in FLAG_MARKS.items() if bool(row.get(flag, False)))


def trusted(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that are neither host-bound nor noisy."""
    keep = pd.Series(True, index=frame.index)
    for flag in FLAG_MARKS:
        if flag in frame:
            keep &= ~frame[flag].astype(bool)
    return frame[keep]


def overlap(low_a, high_a, low_b, high_b) -> bool:
    """Whether two intervals overlap (a missing bound counts as overlapping: nothing can be ranked)."""
    bounds = (low_a, high_a, low_b, high_b)
    if any(pd.isna(b) for b in bounds):
        return True
    return not (high_a < low_b or high_b < low_a)


def physics_violations(steady: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Cells where a pass is faster than a pass it contains, beyond both intervals.

    `steady`: ok rows of one warm-up, with pass, median_ms and (where known)
    ci_low_ms/ci_high_ms; `key`: the columns naming a cell besides the pass.
    One row per violation: the cell, the two passes and their medians.
    """
    rows = []
    have_ci = {"ci_low_ms", "ci_high_ms"} <= set(steady.columns)
    for cell, part in steady.groupby(key, observed=True, sort=False):
        passes = part.set_index("pass")
        for bigger, smaller in CONTAINS.items():
            if bigger not in passes.index or smaller not in passes.index:
                continue
            big, small = passes.loc[bigger], passes.loc[smaller]
            if not big["median_ms"] < small["median_ms"]:
                continue
            # Within the intervals the order is noise; beyond them the table itself is inconsistent.
            beyond = not have_ci or big["ci_high_ms"] < small["ci_low_ms"]
            rows.append({**dict(zip(key, cell if isinstance(cell, tuple) else (cell,), strict=True)),
                         "pass": bigger, "contains": smaller, "median_ms": big["median_ms"],
                         "contained_median_ms": small["median_ms"], "beyond_intervals": beyond})
    return pd.DataFrame(rows)
