"""How much of a step's communication the backward hides, from the time ranges of both on one rank.

The host-timestamp version of the profile's ranges: each all-reduce's range runs from the moment
its rank issues it (time.perf_counter in the gradient hook, or after the backward for naive and
flat) to the moment its work completes (a callback on the work's future; for a blocking call, its
return), so a range includes the time the collective waited in the backend's queue and for the
other ranks. The backward's range runs from the call of `backward()` to the moment its last
gradient lands (a gradient hook on every parameter; DDP's backward() goes on to wait for its
all-reduces, which are communication, not the backward's computing). The hidden
share is the time of the union of the communication's ranges that lies inside the backward's
range, over the whole union's time.

Exact on a CPU with Gloo: the backward runs on the calling thread and Gloo completes each future
on its own thread when the reduction is done. Not on a GPU: there both the backward and NCCL's
all-reduces run later on the device than the host issues them, and an NCCL work's future completes
when the host has queued it, not when the GPU has finished it; reading those ranges takes the
device's own timestamps (a profile's kernel ranges), which this module does not do. So the
measuring code records ranges on a CPU only, and leaves them empty on a GPU.

Torch-free: the recorder holds floats; the data-parallel versions (lmstudy.measure.data_parallel)
call it.
"""

from __future__ import annotations

import threading
import time


def union(ranges: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The ranges merged where they overlap or touch, in order."""
    merged: list[list[float]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def inside(ranges: list[tuple[float, float]], window: tuple[float, float]) -> float:
    """Seconds of the union of `ranges` that lie inside `window`."""
    low, high = window
    return sum(max(0.0, min(end, high) - max(start, low)) for start, end in union(ranges))


def length(ranges: list[tuple[float, float]]) -> float:
    """Seconds the union of `ranges` covers."""
    return sum(end - start for start, end in union(ranges))


class CommRanges:
    """The all-reduces' ranges of one step on this rank: `issued` returns a range's index, `done`
    closes it (from any thread: Gloo's futures complete on its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.starts: list[float] = []
        self.ends: list[float | None] = []
        self.last_gradient = float("nan")

    def gradient_landed(self, _param) -> None:
        """A gradient hook (register_post_accumulate_grad_hook): the backward's computing ends at the last."""
        self.last_gradient = time.perf_counter()

    def issued(self) -> int:
        with self._lock:
            self.starts.append(time.perf_counter())
            self.ends.append(None)
            return len(self.starts) - 1

    def done(self, index: int) -> None:
        now = time.perf_counter()
        with self._lock:
            self.ends[index] = now

    def reset(self) -> None:
        with self._lock:
            self.starts, self.ends = [], []
        self.last_gradient = float("nan")

    def summary(self, backward: tuple[float, float]) -> dict:
        """This step's communication time (the union of its ranges), the part inside `backward`,
        and the share hidden; NaN where no all-reduce ran (or one never completed)."""
        with self._lock:
            ranges = list(zip(self.starts, self.ends, strict=True))
        if not ranges or any(end is None for _, end in ranges):
            nan = float("nan")
            return {"comm_span_s": nan, "comm_in_backward_s": nan, "backward_s": backward[1] - backward[0]}
        return {
            "comm_span_s": length(ranges),
            "comm_in_backward_s": inside(ranges, backward),
            "backward_s": backward[1] - backward[0],
        }
