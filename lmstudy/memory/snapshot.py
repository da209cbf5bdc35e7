"""Rebuild a CUDA memory snapshot's allocations and its allocated-bytes timeline.

A snapshot (``torch.cuda.memory._dump_snapshot``) holds two things:

- ``segments``: every block of the caching allocator at dump time, live or not;
- ``device_traces``: the ``alloc`` / ``free_requested`` / ``free_completed``
  events after ``_record_memory_history`` started (and ``annotations``).

Blocks allocated before recording began (parameters, optimizer state, the
previous step's gradients) appear in the trace only if they are freed, and in
the segments only if they are still live. So the allocations are rebuilt by
walking the trace backwards from the live blocks at dump time: an ``alloc``
closes an allocation, a ``free_requested`` opens one that must have been live
before it. Whatever is still open at the start of the trace was allocated
before recording began.

The allocator counts a block as allocated from ``alloc`` to
``free_requested`` (``torch.cuda.memory_allocated`` drops at the request,
not when a stream-ordered free completes), in block sizes: a trace event
carries the requested size, which the allocator rounds up to a multiple of
512 bytes. Blocks live at dump time have their exact block size.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np

from lmstudy.devices import UserError

BLOCK_ROUNDING = 512
ALLOC, FREE = "alloc", "free_requested"


def block_size(requested: int) -> int:
    """The caching allocator's block size for a request of `requested` bytes."""
    return max(BLOCK_ROUNDING, -(-requested // BLOCK_ROUNDING) * BLOCK_ROUNDING)


@dataclasses.dataclass
class Allocation:
    addr: int
    size: int  # bytes counted by the allocator (block size)
    requested: int
    alloc_index: int | None = None  # trace index; None: allocated before recording
    free_index: int | None = None  # trace index; None: live at dump time
    alloc_frames: list = dataclasses.field(default_factory=list)
    free_frames: list = dataclasses.field(default_factory=list)

    @property
    def before_recording(self) -> bool:
        return self.alloc_index is None

    @property
    def live_at_end(self) -> bool:
        return self.free_index is None

    def live_after(self, index: int) -> bool:
        """Live once trace event `index` has happened (index -1: at the start)."""
        started = self.alloc_index is None or self.alloc_index <= index
        return started and (self.free_index is None or self.free_index > index)


@dataclasses.dataclass
class Snapshot:
    path: Path
    device: int
    trace: list[dict]
    allocations: list[Allocation]
    annotations: list[dict]

    @property
    def allocated_at_start(self) -> int:
        return sum(a.size for a in self.allocations if a.before_recording)

    @property
    def allocated_at_end(self) -> int:
        return sum(a.size for a in self.allocations if a.live_at_end)

    def timeline(self) -> np.ndarray:
        """Allocated bytes after each trace event (index i: after event i)."""
        delta = np.zeros(len(self.trace), dtype=np.int64)
        for a in self.allocations:
            if a.alloc_index is not None:
                delta[a.alloc_index] += a.size
            if a.free_index is not None:
                delta[a.free_index] -= a.size
        return self.allocated_at_start + np.cumsum(delta)

    def peak(self) -> tuple[int, int]:
        """(peak allocated bytes, index of the event that reached it; -1: the start)."""
        line = self.timeline()
        if len(line) == 0 or line.max() <= self.allocated_at_start:
            return self.allocated_at_start, -1
        index = int(line.argmax())
        return int(line[index]), index

    def live_at(self, index: int) -> list[Allocation]:
        return [a for a in self.allocations if a.live_after(index)]

    def event_time_us(self, index: int) -> int | None:
        if not self.trace:
            return None
        return self.trace[max(index, 0)]["time_us"]


def load_pickle(path: str | Path) -> dict:
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = pickle.load(f)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist: pass the path of a memory snapshot pickle.") from None
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as error:
        raise UserError(
            f"{path} is not a readable memory snapshot ({error}): "
            "pass a file written by torch.cuda.memory._dump_snapshot."
        ) from None
    if not isinstance(data, dict) or "segments" not in data or "device_traces" not in data:
        raise UserError(
            f"{path} is not a CUDA memory snapshot (no segments/device_traces): "
            "pass a file written by torch.cuda.memory._dump_snapshot."
        )
    return data


def _busiest_device(data: dict) -> int:
    traces = data["device_traces"]
    if traces and any(traces):
        return max(range(len(traces)), key=lambda d: len(traces[d]))
    devices = [s["device"] for s in data["segments"]]
    return max(set(devices), key=devices.count) if devices else 0


def rebuild(data: dict, path: str | Path = "", device: int | None = None) -> Snapshot:
    """Every allocation of `device` seen by the snapshot, with its lifetime."""
    device = _busiest_device(data) if device is None else device
    traces = data["device_traces"]
    trace = list(traces[device]) if device < len(traces) else []
    open_: dict[int, Allocation] = {}
    for segment in data["segments"]:
        if segment.get("device", device) != device:
            continue
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                open_[block["address"]] = Allocation(
                    addr=block["address"],
                    size=block["size"],
                    requested=block.get("requested_size", block["size"]),
                    alloc_frames=block.get("frames", []),
                )
    done: list[Allocation] = []
    for index in range(len(trace) - 1, -1, -1):
        event = trace[index]
        action, addr = event["action"], event.get("addr")
        if action == ALLOC:
            allocation = open_.pop(addr, None)
            if allocation is None:
                # Freed without a free_requested in the trace: cannot happen in
                # a consistent trace; keep the event rather than lose its bytes.
                allocation = Allocation(addr, block_size(event["size"]), event["size"])
                allocation.free_index = index
            allocation.alloc_index = index
            allocation.requested = event["size"]
            allocation.alloc_frames = event.get("frames", [])
            done.append(allocation)
        elif action == FREE:
            if addr in open_:
                raise UserError(
                    f"{path}: the trace frees address {addr:#x} twice without an "
                    "allocation between; the snapshot is corrupt, record it again."
                )
            open_[addr] = Allocation(
                addr=addr,
                size=block_size(event["size"]),
                requested=event["size"],
                free_index=index,
                free_frames=event.get("frames", []),
            )
    allocations = list(open_.values()) + done[::-1]
    annotations = [a for a in data.get("external_annotations", []) if a.get("device", device) == device]
    return Snapshot(Path(path), device, trace, allocations, annotations)


def load(path: str | Path, device: int | None = None) -> Snapshot:
    return rebuild(load_pickle(path), path, device)
