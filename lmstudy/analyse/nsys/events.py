"""Attribute GPU work to the program's ranges: the tidy kernel table.

A profile is three tables (`Events`):

- ranges: the program's named ranges (NVTX push/pop or record_function), one
  row per instance: thread, name, start, end (ns);
- launches: the host calls that started GPU work (a CUDA runtime or driver
  call), thread, start, end, and the correlation id they share with the work;
- activities: the GPU work itself (kernels, memcpy, memset): correlation,
  name, kind, start, end. On a CPU profile the operators stand in for
  kernels and are their own launches.

A kernel belongs to the innermost range that encloses the host call that
launched it, on the thread that made the call (as nsys's nvtx_kern_sum does).

The backward pass is the exception that needs a rule: PyTorch's autograd
engine runs a CUDA backward on its own device thread (``pt_autograd_0``),
which has none of the step's ranges, while the main thread waits inside
``loss.backward()``, that is inside the ``backward`` range. The per-module
ranges of that backward (lmstudy.measure.module_ranges) are on autograd's
thread: a range of a thread without the step's own ranges that no range of
its thread encloses is adopted by the deepest range open at its start on a
thread that has them, so its path reads "step/backward/module ...". A launch that
no range of its own thread encloses is *adopted*: it goes to the innermost
range open at the moment of the launch on the thread that holds the
program's ranges. During ``loss.backward()`` that range is ``backward``. The
table counts adopted work apart (``adopted_instances``, ``adopted_ns``; work
inside an adopted range too) so a reader can see how much of a range came
from another thread.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from lmstudy.analyse.nsys.categories import categorize
from lmstudy.errors import UserError
from lmstudy.ranges import PHASES, PROFILED_PASS, STEP
from lmstudy.registry import reference

RANGE_COLUMNS = ["thread", "name", "start", "end"]
LAUNCH_COLUMNS = ["thread", "start", "end", "correlation"]
ACTIVITY_COLUMNS = ["correlation", "name", "kind", "start", "end"]

KERNEL_TABLE_COLUMNS = [
    "range",
    "path",
    "phase",
    "kernel",
    "kind",
    "category",
    "instances",
    "total_ns",
    "adopted_instances",
    "adopted_ns",
    "min_ns",
    "max_ns",
]
RANGE_TABLE_COLUMNS = [
    "range",
    "path",
    "instances",
    "cpu_ns",
    "gpu_ns",
    "gpu_span_ns",
    "kernels",
]
PATH_SEPARATOR = "/"


@dataclasses.dataclass
class Events:
    ranges: pd.DataFrame
    launches: pd.DataFrame
    activities: pd.DataFrame
    source: str = ""  # "nsys" or "torch"
    note: str = ""  # what a reader of the tables should know about how they were read

    def __post_init__(self):
        self.ranges = self.ranges[RANGE_COLUMNS].reset_index(drop=True)
        self.launches = self.launches[LAUNCH_COLUMNS].reset_index(drop=True)
        self.activities = self.activities[ACTIVITY_COLUMNS].reset_index(drop=True)


def split_by_pass(events: Events) -> dict[str, Events]:
    """A capture that profiled several passes, as the events of each pass.

    The program ran each pass's profiled steps inside a range named
    PROFILED_PASS + the pass (lmstudy.ranges). A pass gets what lies in its
    range's window: the ranges inside it (the pass's own range left out, so
    that paths read as in a capture of that pass alone), the launches that
    start in it on any thread (the autograd thread's too), and the GPU work
    those launches started. Every step synchronizes inside the window, so no
    work of one pass can fall in the next one's.
    """
    names = events.ranges["name"].astype(str)
    is_marker = names.str.startswith(PROFILED_PASS)
    passes: dict[str, Events] = {}
    for marker in events.ranges[is_marker].itertuples():
        name = marker.name[len(PROFILED_PASS) :]
        if name in passes:
            raise UserError(
                f"the profile holds two ranges {marker.name!r}; a profile of {reference('nsys')}'s program "
                "has one per pass: profile again, with one capture."
            )
        ranges = events.ranges[
            ~is_marker & events.ranges["start"].ge(marker.start) & events.ranges["end"].le(marker.end)
        ]
        starts = events.launches["start"]
        launches = events.launches[starts.ge(marker.start) & starts.le(marker.end)]
        activities = events.activities[events.activities["correlation"].isin(launches["correlation"])]
        passes[name] = Events(ranges, launches, activities, source=events.source, note=events.note)
    in_a_pass = set().union(*(set(part.activities["correlation"]) for part in passes.values()))
    outside = int((~events.activities["correlation"].isin(in_a_pass)).sum())
    if passes and outside:
        # Nothing the program does runs there today; say so if that changes.
        note = f"{outside} GPU activities of the capture lie outside every pass's range and are left out."
        for part in passes.values():
            part.note = " ".join(filter(None, [part.note, note]))
    return passes


@dataclasses.dataclass
class _Timeline:
    """The innermost open range at every moment of one thread."""

    bounds: np.ndarray  # segment starts, ascending
    innermost: np.ndarray  # range row index per segment, -1 for none

    def at(self, times: np.ndarray) -> np.ndarray:
        if len(self.bounds) == 0:
            return np.full(len(times), -1)
        pos = np.searchsorted(self.bounds, times, side="right") - 1
        found = np.where(pos >= 0, self.innermost[np.clip(pos, 0, None)], -1)
        return found


def _timeline(ranges: pd.DataFrame) -> _Timeline:
    """Sweep one thread's ranges; the innermost open range is the latest started.

    A range closing at time t no longer encloses a launch at t; one opening at
    t does.
    """
    points = []
    for idx, start, end in zip(ranges.index, ranges["start"], ranges["end"], strict=False):
        points.append((start, 1, idx))
        points.append((end, 0, idx))
    points.sort(key=lambda p: (p[0], p[1]))
    open_ranges: list[tuple[int, int]] = []  # (start, idx)
    bounds, innermost = [], []
    starts = ranges["start"]
    for time, is_start, idx in points:
        if is_start:
            open_ranges.append((starts[idx], idx))
        else:
            open_ranges.remove((starts[idx], idx))
        current = max(open_ranges)[1] if open_ranges else -1
        if bounds and bounds[-1] == time:
            innermost[-1] = current
        else:
            bounds.append(time)
            innermost.append(current)
    return _Timeline(np.asarray(bounds, dtype=np.int64), np.asarray(innermost, dtype=np.int64))


def _parents(ranges: pd.DataFrame) -> np.ndarray:
    """For each range, the range of the same thread that directly encloses it."""
    parents = np.full(len(ranges), -1)
    for _, group in ranges.groupby("thread"):
        order = group.sort_values(["start", "end"], ascending=[True, False])
        stack: list[int] = []
        for idx, end in zip(order.index, order["end"], strict=False):
            while stack and ranges.at[stack[-1], "end"] < end:
                stack.pop()
            parents[idx] = stack[-1] if stack else -1
            stack.append(idx)
    return parents


def _paths(ranges: pd.DataFrame, parents: np.ndarray) -> list[str]:
    names = ranges["name"].tolist()
    paths: list[str] = []
    for idx in range(len(ranges)):
        chain, at = [], idx
        while at >= 0:
            chain.append(names[at])
            at = parents[at]
        paths.append(PATH_SEPARATOR.join(reversed(chain)))
    return paths


def phase_of(path: str) -> str:
    """forward, backward or optimizer for a path inside one; else its outermost range."""
    parts = path.split(PATH_SEPARATOR) if path else []
    for part in parts:
        if part in PHASES:
            return part
    return parts[0] if parts else ""


@dataclasses.dataclass
class Attribution:
    """Every activity with the range instance that owns it."""

    activities: pd.DataFrame  # + owner (range row, -1 none), adopted (bool)
    ranges: pd.DataFrame  # + parent, path


def _adopt_ranges(ranges: pd.DataFrame, parents: np.ndarray) -> np.ndarray:
    """Where a range that no range of its own thread encloses was opened in a thread with none of the
    step's ranges (the per-module ranges of a CUDA backward, on autograd's thread), its parent is
    the deepest range open at its start on a thread that holds them (during loss.backward(): the
    backward range, or a module's range inside it). True for each range so adopted."""
    adopted = np.zeros(len(ranges), dtype=bool)
    names = ranges["name"].astype(str)
    program = set(ranges.loc[names.isin([*PHASES, STEP]), "thread"])
    roots = (parents < 0) & ~ranges["thread"].isin(program).to_numpy()
    if not program or not roots.any():
        return adopted
    depth = np.zeros(len(ranges), dtype=int)
    for idx in range(len(ranges)):
        at = parents[idx]
        while at >= 0:
            depth[idx] += 1
            at = parents[at]
    times = ranges.loc[roots, "start"].to_numpy()
    best = np.full(len(times), -1)
    for _, group in ranges[ranges["thread"].isin(program)].groupby("thread"):
        found = _timeline(group).at(times)
        deeper = depth[np.clip(found, 0, None)] > depth[np.clip(best, 0, None)]
        better = (found >= 0) & ((best < 0) | deeper)
        best = np.where(better, found, best)
    parents[np.flatnonzero(roots)] = best
    adopted[np.flatnonzero(roots)] = best >= 0
    return adopted


def _crossed(parents: np.ndarray, adopted: np.ndarray) -> np.ndarray:
    """For each range: it or a range above it was adopted from another thread."""
    crossed = adopted.copy()
    for idx in range(len(parents)):
        at = idx
        while at >= 0 and not crossed[idx]:
            crossed[idx] = adopted[at]
            at = parents[at]
    return crossed


def attribute(events: Events) -> Attribution:
    ranges = events.ranges.copy()
    parents = _parents(ranges)
    adopted = _adopt_ranges(ranges, parents)
    ranges["parent"] = parents
    ranges["path"] = _paths(ranges, parents)
    crossed = _crossed(parents, adopted)

    launches = events.launches.copy()
    launches["owner"] = -1
    for thread, group in ranges.groupby("thread"):
        mask = (launches["thread"] == thread).to_numpy()
        if mask.any():
            launches.loc[mask, "owner"] = _timeline(group).at(launches.loc[mask, "start"].to_numpy())
    # Work launched inside a range adopted from another thread was adopted too.
    owners = launches["owner"].to_numpy()
    launches["adopted"] = (owners >= 0) & (crossed[np.clip(owners, 0, None)] if len(crossed) else False)
    orphans = (launches["owner"] < 0).to_numpy()
    range_threads = set(ranges["thread"])
    if orphans.any() and len(range_threads) > 0:
        # The threads that hold ranges; where several do, the deepest open range wins.
        depth = ranges["path"].str.count(PATH_SEPARATOR).to_numpy()
        times = launches.loc[orphans, "start"].to_numpy()
        best = np.full(len(times), -1)
        for _, group in ranges.groupby("thread"):
            found = _timeline(group).at(times)
            better = (found >= 0) & (
                (best < 0) | (depth[np.clip(found, 0, None)] > depth[np.clip(best, 0, None)])
            )
            best = np.where(better, found, best)
        launches.loc[orphans, "owner"] = best
        launches.loc[orphans, "adopted"] = best >= 0

    acts = events.activities.merge(
        launches[["correlation", "owner", "adopted"]].drop_duplicates("correlation"),
        on="correlation",
        how="left",
    )
    acts["owner"] = acts["owner"].fillna(-1).astype(int)
    acts["adopted"] = acts["adopted"].fillna(False).astype(bool)
    return Attribution(acts, ranges)


def _owner_columns(attr: Attribution) -> pd.DataFrame:
    acts = attr.activities.copy()
    names = attr.ranges["name"].to_numpy()
    paths = attr.ranges["path"].to_numpy()
    owned = acts["owner"] >= 0
    acts["range"] = ""
    acts["path"] = ""
    acts.loc[owned, "range"] = names[acts.loc[owned, "owner"]]
    acts.loc[owned, "path"] = paths[acts.loc[owned, "owner"]]
    acts["duration"] = acts["end"] - acts["start"]
    return acts


def kernel_table(events: Events) -> pd.DataFrame:
    """One row per (innermost range, kernel): instances and time, over the whole profile.

    `range` is the range's name as the program wrote it ("" outside every
    range); `path` is it with its enclosing ranges ("step/forward/computing
    softmax"), `phase` the pass phase it belongs to.
    """
    acts = _owner_columns(attribute(events))
    if acts.empty:
        return pd.DataFrame(columns=KERNEL_TABLE_COLUMNS)
    acts["adopted_duration"] = acts["duration"].where(acts["adopted"], 0)
    table = (
        acts.groupby(["range", "path", "name", "kind"], sort=False)
        .agg(
            instances=("duration", "size"),
            total_ns=("duration", "sum"),
            adopted_instances=("adopted", "sum"),
            adopted_ns=("adopted_duration", "sum"),
            min_ns=("duration", "min"),
            max_ns=("duration", "max"),
        )
        .reset_index()
        .rename(columns={"name": "kernel"})
    )
    table["phase"] = table["path"].map(phase_of)
    table["category"] = [categorize(k, kind) for k, kind in zip(table["kernel"], table["kind"], strict=False)]
    table = table.sort_values(["path", "total_ns"], ascending=[True, False], kind="stable")
    return table[KERNEL_TABLE_COLUMNS].reset_index(drop=True)


def range_table(events: Events) -> pd.DataFrame:
    """Per range (name and path), over all its instances: host time and the GPU
    work it encloses, its own and its children's.

    gpu_ns sums kernel durations; gpu_span_ns sums, over instances, the time
    from the first enclosed kernel's start to the last one's end (nsys's
    "GPU projection" of a range).
    """
    attr = attribute(events)
    ranges, acts = attr.ranges, attr.activities
    acts = acts[acts["owner"] >= 0]
    parents = ranges["parent"].to_numpy()
    # Every activity counts in its owner and in each of the owner's ancestors.
    rows = []
    owner = acts["owner"].to_numpy()
    level = owner.copy()
    while (level >= 0).any():
        keep = level >= 0
        rows.append(
            pd.DataFrame(
                {
                    "instance": level[keep],
                    "start": acts["start"].to_numpy()[keep],
                    "end": acts["end"].to_numpy()[keep],
                }
            )
        )
        level = np.where(keep, parents[np.clip(level, 0, None)], -1)
    inclusive = pd.concat(rows) if rows else pd.DataFrame(columns=["instance", "start", "end"])
    inclusive["duration"] = inclusive["end"] - inclusive["start"]
    per_instance = inclusive.groupby("instance").agg(
        gpu_ns=("duration", "sum"),
        first=("start", "min"),
        last=("end", "max"),
        kernels=("duration", "size"),
    )
    per_instance["gpu_span_ns"] = per_instance["last"] - per_instance["first"]
    frame = ranges[["name", "path", "start", "end"]].copy()
    frame["cpu_ns"] = frame["end"] - frame["start"]
    frame = frame.join(per_instance[["gpu_ns", "gpu_span_ns", "kernels"]])
    frame[["gpu_ns", "gpu_span_ns", "kernels"]] = frame[["gpu_ns", "gpu_span_ns", "kernels"]].fillna(0)
    table = (
        frame.groupby(["name", "path"], sort=False)
        .agg(
            instances=("cpu_ns", "size"),
            cpu_ns=("cpu_ns", "sum"),
            gpu_ns=("gpu_ns", "sum"),
            gpu_span_ns=("gpu_span_ns", "sum"),
            kernels=("kernels", "sum"),
        )
        .reset_index()
        .rename(columns={"name": "range"})
    )
    for col in ("gpu_ns", "gpu_span_ns", "kernels"):
        table[col] = table[col].astype("int64")
    return table[RANGE_TABLE_COLUMNS].sort_values("path", kind="stable").reset_index(drop=True)
