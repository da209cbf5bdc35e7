"""Read the Chrome trace torch.profiler writes into the same `Events` as nsys.

- ranges: `user_annotation` events, that is torch.profiler.record_function,
  which lmstudy.measure.markers opens next to every NVTX range with the same name.
  PyTorch opens some of its own (``Optimizer.step#AdamW.step``,
  ``ProfilerStep#3``); those are left out, as nsys reads only the program's
  NVTX domain.
- on a GPU: `cuda_runtime`/`cuda_driver` calls are the launches, `kernel`,
  `gpu_memcpy` and `gpu_memset` the activities, joined by `correlation`;
- on a CPU (no GPU activity in the trace): ATen operators (`cpu_op`)
  stand in for kernels, each its own launch, timed by their self time (less
  the operators they call), so nothing is counted twice. Autograd's wrapper
  of each backward node (``autograd::engine::evaluate_function: X``) opens
  before the node's pre-hooks run, and those hooks switch the module ranges
  (lmstudy.measure.module_ranges): it is placed at its node's start, so that
  it goes to the module whose backward launched the node, as the node does.

Trace times are microseconds with nanosecond decimals; they become integer ns.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from lmstudy.analyse.nsys.events import Events
from lmstudy.errors import UserError

TORCH_INTERNAL_RANGES = re.compile(r"^(Optimizer\.|ProfilerStep#|enumerate\(DataLoader\)|## )")
_GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
_MEMCPY_NAMES = {
    "HtoD": "Host-to-Device",
    "DtoH": "Device-to-Host",
    "DtoD": "Device-to-Device",
    "HtoH": "Host-to-Host",
    "PtoP": "Peer-to-Peer",
}


def load_trace(path: Path) -> list[dict]:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as handle:
            data = json.load(handle)
    except (OSError, json.JSONDecodeError, EOFError) as error:
        raise UserError(f"{path} is not a readable torch.profiler trace ({error}); profile again.") from None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if events is None:
        raise UserError(f"{path} has no traceEvents: it is not a Chrome trace from torch.profiler.")
    return events


def _ns(values) -> np.ndarray:
    return np.round(np.asarray(values, dtype=float) * 1000).astype("int64")


def _frame(events: list[dict], categories: tuple[str, ...]) -> pd.DataFrame:
    rows = [
        {
            "cat": e["cat"],
            "name": e.get("name", ""),
            "thread": e.get("tid"),
            "ts": e["ts"],
            "dur": e.get("dur", 0),
            "correlation": (e.get("args") or {}).get("correlation"),
        }
        for e in events
        if e.get("ph") == "X" and e.get("cat") in categories
    ]
    frame = pd.DataFrame(rows, columns=["cat", "name", "thread", "ts", "dur", "correlation"])
    frame["start"] = _ns(frame["ts"])
    frame["end"] = frame["start"] + _ns(frame["dur"])
    frame["thread"] = frame["thread"].astype(str)
    return frame


def _memcpy_name(name: str, cat: str) -> str:
    if cat == "gpu_memset":
        return "[CUDA memset]"
    match = re.search(r"Memcpy (\w+)", name)
    kind = _MEMCPY_NAMES.get(match.group(1), match.group(1)) if match else "Other"
    return f"[CUDA memcpy {kind}]"


def _self_times(ops: pd.DataFrame) -> pd.DataFrame:
    """Each operator with its self time: its duration less its direct children's.

    An operator's activity keeps its start and lasts its self time, so the
    operators' totals add up to the time spent in operators, counted once.
    """
    self_ns = (ops["end"] - ops["start"]).to_numpy().copy()
    for _, group in ops.groupby("thread"):
        order = group.sort_values(["start", "end"], ascending=[True, False])
        stack: list[tuple[int, int]] = []  # (position, end)
        for idx, start, end in zip(order.index, order["start"], order["end"], strict=False):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                self_ns[stack[-1][0]] -= end - start
            stack.append((idx, end))
    out = ops.copy()
    out["end"] = out["start"] + np.clip(self_ns, 0, None)
    return out


AUTOGRAD_WRAPPER = "autograd::engine::evaluate_function: "


def _at_their_nodes(ops: pd.DataFrame) -> pd.DataFrame:
    """`ops` (self-timed: end = start + self time) with each autograd wrapper moved to the start of the
    node it evaluates (its first operator named as the node, on its thread); its self time kept."""
    wrappers = ops.index[ops["name"].str.startswith(AUTOGRAD_WRAPPER)]
    if not len(wrappers):
        return ops
    starts = {key: np.sort(group["start"].to_numpy()) for key, group in ops.groupby(["thread", "name"])}
    out = ops.copy()
    for idx in wrappers:
        start = ops.at[idx, "start"]
        node_starts = starts.get((ops.at[idx, "thread"], ops.at[idx, "name"][len(AUTOGRAD_WRAPPER):]))
        if node_starts is None:
            continue
        first = np.searchsorted(node_starts, start)
        if first < len(node_starts):
            moved = int(node_starts[first])
            out.at[idx, "end"] = moved + (ops.at[idx, "end"] - start)
            out.at[idx, "start"] = moved
    return out


def read_events(path: Path) -> Events:
    events = load_trace(path)
    ranges = _frame(events, ("user_annotation",))
    ranges = ranges[~ranges["name"].str.match(TORCH_INTERNAL_RANGES)]
    gpu = _frame(events, _GPU_CATEGORIES)
    if len(gpu):
        launches = _frame(events, ("cuda_runtime", "cuda_driver"))
        launches = launches[launches["correlation"].notna()]
        gpu["kind"] = gpu["cat"].map({"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"})
        copies = gpu["kind"] != "kernel"
        gpu.loc[copies, "name"] = [
            _memcpy_name(n, c) for n, c in zip(gpu.loc[copies, "name"], gpu.loc[copies, "cat"], strict=False)
        ]
        activities = gpu
    else:
        ops = _at_their_nodes(_self_times(_frame(events, ("cpu_op",)).reset_index(drop=True)))
        ops = ops.assign(correlation=np.arange(len(ops)), kind="cpu_op")
        launches, activities = ops, ops
    for frame in (launches, activities):
        frame["correlation"] = frame["correlation"].astype("int64")
    return Events(ranges, launches, activities, source="torch")
