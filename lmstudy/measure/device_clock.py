"""The one clock a timed region reads: the device is synchronized before each reading.

A GPU runs a step's kernels after the host has queued them, so the host's
clock read right after a step measures the launches, not the work. Every
timed region of a measuring job (a step, a first step, a build, a job's
phase around device work) takes its start and its end from `now(device)`,
which first waits until the device has finished everything queued on it:
the region then holds its own device work, and none of the work queued
before it. On a CPU the wait does nothing.

The host clock is read directly only where there is no device to wait for:
a forking parent's wall times and the fork itself (that process must never
start CUDA: lmstudy.measure.fresh_process), and a job's "start" phase around
open_device, which begins before the device exists and ends with
devices.initialize_device having waited for it. `synchronize` alone is for
waits that are no timer's (before memory is read, inside a profiler's capture).
"""

from __future__ import annotations

import contextlib
import time

import torch

from lmstudy.phases import PhaseClock


def synchronize(device: torch.device) -> None:
    """Wait until `device` has finished the work queued on it (nothing to wait for off CUDA)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def now(device: torch.device | None) -> float:
    """Seconds on the host's monotonic clock, read once `device` has finished its queued work.

    None: no device to wait for yet (a cold start's first reading, before CUDA is initialised).
    """
    if device is not None:
        synchronize(device)
    return time.perf_counter()


@contextlib.contextmanager
def phase(clock: PhaseClock, name: str, device: torch.device):
    """PhaseClock.timing(name) for a phase that runs device work: its readings are `now(device)`.

    A block that raises is counted up to the host's clock: waiting on the
    device after a failure (an error in a kernel) could raise again.
    """
    started = now(device)
    try:
        yield
    except BaseException:
        clock.add(name, now(None) - started)
        raise
    clock.add(name, now(device) - started)
