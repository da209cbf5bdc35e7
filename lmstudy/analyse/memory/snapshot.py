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
not when a stream-ordered free completes), in block sizes. A trace event
carries only the requested size; the block can be larger than the request
rounded up to 512 bytes: the allocator carves a block from the start of a
cached free block and splits the rest off only if the rest is at least 512
bytes (small pool, requests up to 1 MiB) or more than 1 MiB (large pool), so
a large request served from a free block up to 1 MiB bigger, or from a fresh
segment rounded up to 2 MiB, gets the whole block (e.g. a 30,720,000-byte
embedding in a 30 MiB block; an autocast bf16 weight copy in a cached block a
little larger). So the block sizes are recovered by replaying the trace over
the segments' layout (:func:`_replay_block_sizes`). Blocks live at dump time
have their exact block size.
"""

from __future__ import annotations

import bisect
import dataclasses
from pathlib import Path

import numpy as np

from lmstudy.analyse.memory import plain_pickle, shape
from lmstudy.errors import UserError

BLOCK_ROUNDING = 512
SMALL_SIZE = 1 << 20  # kSmallSize: the largest request of the small pool
ALLOC, FREE, FREE_COMPLETED = "alloc", "free_requested", "free_completed"
SEGMENT_ALLOC, SEGMENT_FREE = "segment_alloc", "segment_free"


def block_size(requested: int) -> int:
    """The caching allocator's block size for a request of `requested` bytes."""
    return max(BLOCK_ROUNDING, -(-requested // BLOCK_ROUNDING) * BLOCK_ROUNDING)


def should_split(free: int, size: int, max_split_size: int | None = None) -> bool:
    """Whether the allocator splits a free block of `free` bytes for a `size`-byte block.

    CUDACachingAllocator's ``should_split``: the small pool splits off any rest
    of at least 512 bytes, the large pool only a rest of more than 1 MiB (and
    never for blocks of ``max_split_size`` or more).
    """
    remaining = free - size
    if size <= SMALL_SIZE:
        return remaining >= BLOCK_ROUNDING
    if max_split_size is not None and size >= max_split_size:
        return False
    return remaining > SMALL_SIZE


@dataclasses.dataclass
class Allocation:
    addr: int
    size: int  # bytes counted by the allocator (block size)
    requested: int
    alloc_index: int | None = None  # trace index; None: allocated before recording
    free_index: int | None = None  # trace index; None: live at dump time
    alloc_frames: list = dataclasses.field(default_factory=list)
    free_frames: list = dataclasses.field(default_factory=list)
    size_known: bool = True  # False: block size inferred from the trace's requested size

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
    """The snapshot at `path` as plain data, checked to hold what the analyzer reads.

    Read with lmstudy.analyse.memory.plain_pickle: a snapshot is data, and a pickle that
    names any class or function is refused before anything of it runs.
    """
    path = Path(path)
    redo = "pass a file written by torch.cuda.memory._dump_snapshot (lmstudy measure memory)"
    try:
        data = plain_pickle.load(path)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist: pass the path of a memory snapshot pickle.") from None
    except (plain_pickle.NotPlainData, plain_pickle.TooLarge) as error:
        raise UserError(f"{path} is refused as a memory snapshot because {error}: {redo}.") from None
    except Exception as error:  # noqa: BLE001 - any failure to parse means a damaged file
        raise UserError(f"{path} is not a readable memory snapshot ({error!r}): {redo}.") from None
    if not isinstance(data, dict) or "segments" not in data or "device_traces" not in data:
        raise UserError(f"{path} is not a CUDA memory snapshot (no segments/device_traces): {redo}.")
    wrong = shape.problem(data)
    if wrong:
        raise UserError(f"{path} is not a well-formed memory snapshot ({wrong}): {redo}.")
    if not shape.has_allocations(data):
        raise UserError(
            f"{path} records no memory at all (no blocks and no trace events), so it has no peak: "
            "record it again with the model's step inside the recording."
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
                # Neither freed later in the trace nor live at the end: the
                # address is allocated again before it is freed, or the block
                # vanished; the allocator writes neither, and a peak from it
                # would be made up.
                raise UserError(
                    f"{path}: the trace allocates address {addr:#x} (event {index}) without freeing it "
                    "before it is allocated again or the snapshot ends; the snapshot is corrupt, "
                    "record it again."
                )
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
                size_known=False,
            )
    allocations = list(open_.values()) + done[::-1]
    _replay_block_sizes(data, device, trace, allocations)
    annotations = [a for a in data.get("external_annotations", []) if a.get("device", device) == device]
    return Snapshot(Path(path), device, trace, allocations, annotations)


def _max_split_size(data: dict) -> int | None:
    value = (data.get("allocator_settings") or {}).get("max_split_size", -1)
    return value if isinstance(value, int) and value > 0 else None


def _replay_block_sizes(data: dict, device: int, trace: list[dict], allocations: list[Allocation]) -> None:
    """Set the block size of allocations known only from the trace.

    Replays the trace over the layout of the segments: a block starts at the
    start of a free block, which ends at the next block still in use (active or
    waiting for its stream-ordered free) or at the end of its segment, and
    takes the whole free block unless :func:`should_split` splits it. Blocks
    allocated before recording and freed during it take the rest up to the
    next block in use at the start if that rest is too small to be a free
    block of the large pool (at most 1 MiB). Without the segments or with
    expandable segments the sizes stay the request rounded up to 512 bytes.
    """
    settings = data.get("allocator_settings") or {}
    mapped = any(e["action"] in ("segment_map", "segment_unmap") for e in trace)
    if settings.get("expandable_segments") or mapped:
        return
    layout = _Layout(
        _segments_at_start(data, device, trace), _blocks_in_use_at_start(data, device, trace, allocations)
    )
    unknown = [a for a in allocations if a.before_recording and not a.size_known]
    _widen_blocks_from_before_recording(layout, unknown)
    _replay_trace(layout, trace, allocations, _max_split_size(data))


def _segments_at_start(data: dict, device: int, trace: list[dict]) -> dict[int, int]:
    """The device's segments when recording began (start -> size): those at dump time, less the ones
    the trace allocated, plus the ones it freed."""
    segments: dict[int, int] = {}
    for segment in data["segments"]:
        if segment.get("device", device) == device:
            segments[segment["address"]] = segment["total_size"]
    for event in reversed(trace):
        if event["action"] == SEGMENT_ALLOC:
            segments.pop(event["addr"], None)
        elif event["action"] == SEGMENT_FREE:
            segments[event["addr"]] = event["size"]
    return segments


def _blocks_in_use_at_start(
    data: dict, device: int, trace: list[dict], allocations: list[Allocation]
) -> dict[int, int]:
    """The blocks in use when recording began (start -> end): live allocations, plus blocks whose
    stream-ordered free was pending (completed in the trace or at dump time)."""
    in_use = {a.addr: a.addr + a.size for a in allocations if a.before_recording}
    seen: set[int] = set()
    for event in trace:
        action, addr = event["action"], event.get("addr")
        if action in (ALLOC, FREE):
            seen.add(addr)
        elif action == FREE_COMPLETED and addr not in seen:
            seen.add(addr)
            in_use.setdefault(addr, addr + block_size(event["size"]))
    allocated_in_trace = {e["addr"] for e in trace if e["action"] == ALLOC}
    for segment in data["segments"]:
        if segment.get("device", device) != device:
            continue
        for block in segment["blocks"]:
            if block["state"] == "active_pending_free" and block["address"] not in allocated_in_trace:
                in_use.setdefault(block["address"], block["address"] + block["size"])
    return in_use


class _Layout:
    """The segments and the blocks in use at one moment of the replay, sorted by address so that the
    free block at an address is found by bisection."""

    def __init__(self, segments: dict[int, int], in_use: dict[int, int]):
        self.segments = segments  # start -> size
        self.seg_starts = sorted(segments)
        self.in_use = in_use  # start -> end
        self.starts = sorted(in_use)

    def segment_end(self, addr: int) -> int | None:
        i = bisect.bisect_right(self.seg_starts, addr) - 1
        if i < 0 or addr >= self.seg_starts[i] + self.segments[self.seg_starts[i]]:
            return None
        return self.seg_starts[i] + self.segments[self.seg_starts[i]]

    def free_end(self, addr: int) -> int | None:
        """Where the free block at `addr` ends: at the next block in use or its segment's end."""
        end = self.segment_end(addr)
        if end is None:
            return None
        i = bisect.bisect_right(self.starts, addr)
        return min(end, self.starts[i]) if i < len(self.starts) else end

    def add_segment(self, addr: int, size: int) -> None:
        self.segments[addr] = size
        bisect.insort(self.seg_starts, addr)

    def remove_segment(self, addr: int) -> None:
        if addr in self.segments:
            del self.segments[addr]
            self.seg_starts.remove(addr)

    def use(self, addr: int, end: int) -> None:
        if addr not in self.in_use:
            bisect.insort(self.starts, addr)
        self.in_use[addr] = end

    def release(self, addr: int) -> None:
        if addr in self.in_use:
            del self.in_use[addr]
            self.starts.pop(bisect.bisect_left(self.starts, addr))


def _widen_blocks_from_before_recording(layout: _Layout, unknown: list[Allocation]) -> None:
    """A block allocated before recording whose request leaves a rest too small to be a free block of
    the large pool up to the next block in use took that rest too."""
    for a in unknown:
        end = layout.free_end(a.addr)
        if end is not None and a.size > SMALL_SIZE and 0 < end - (a.addr + a.size) <= SMALL_SIZE:
            a.size = end - a.addr
            layout.in_use[a.addr] = end


def _replay_trace(
    layout: _Layout, trace: list[dict], allocations: list[Allocation], max_split: int | None
) -> None:
    """Each allocation of the trace whose size is unknown takes the free block it starts, unless the
    allocator would split it."""
    by_alloc = {a.alloc_index: a for a in allocations if a.alloc_index is not None}
    for index, event in enumerate(trace):
        action, addr = event["action"], event.get("addr")
        if action == SEGMENT_ALLOC:
            layout.add_segment(addr, event["size"])
        elif action == SEGMENT_FREE:
            layout.remove_segment(addr)
        elif action == ALLOC and index in by_alloc:
            a = by_alloc[index]
            if not a.size_known:
                end = layout.free_end(addr)
                free = None if end is None else end - addr
                if free is not None and free >= a.size and not should_split(free, a.size, max_split):
                    a.size = free
            layout.use(addr, addr + a.size)
        elif action == FREE_COMPLETED and addr in layout.in_use:
            layout.release(addr)


def load(path: str | Path, device: int | None = None) -> Snapshot:
    return rebuild(load_pickle(path), path, device)
