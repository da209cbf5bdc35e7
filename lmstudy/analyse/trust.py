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
    """`frame` with boolean host_bound and noisy columns (False where the data cannot tell)."""
    frame = frame.copy()
    busy = pd.to_numeric(frame["gpu_busy_share"], errors="coerce") if "gpu_busy_share" in frame else None
    spread = pd.to_numeric(frame["process_spread"], errors="coerce") if "process_spread" in frame else None
    ok = frame["status"] == "ok" if "status" in frame else True
    frame["host_bound"] = (busy < min_gpu_busy).fillna(False) & ok if busy is not None else False
    frame["noisy"] = (spread > max_spread).fillna(False) & ok if spread is not None else False
    return frame


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
