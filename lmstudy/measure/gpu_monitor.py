"""The GPU's SM clock and power draw sampled *during* a measured window (NVML).

A rate measured at a throttled clock explains itself only if the clock is
read while the work runs: a reading after the run is the idle GPU's. A
background thread polls NVML (nvidia-ml-py) every `interval_s` from the
window's start to its end; the window's row gets the mean and the minimum SM
clock, the mean power draw, the GPU's maximum SM clock and its enforced
power limit.

Where NVML cannot answer (no NVIDIA driver, a CPU run, the package absent),
every value is None: the columns stay, empty, and nothing fails. Torch-free.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import statistics
import threading
import time

from lmstudy.job_process import UUID_ENV

COLUMNS = (
    "sm_clock_mhz", "min_sm_clock_mhz", "max_sm_clock_mhz", "power_w", "power_limit_w", "clock_samples",
)


def _nvml():
    """The pynvml module, initialised, or None where NVML cannot be used here."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...: no NVML here
        return None
    return pynvml


def _handle(nvml, gpu_uuid: str):
    """NVML's handle of the GPU with `gpu_uuid` (NVML's indices are not CUDA's), else of NVML's GPU 0."""
    if gpu_uuid:
        uuid = gpu_uuid if gpu_uuid.startswith("GPU-") else f"GPU-{gpu_uuid}"
        with contextlib.suppress(Exception):
            return nvml.nvmlDeviceGetHandleByUUID(uuid)
    return nvml.nvmlDeviceGetHandleByIndex(0)


def summarize(clocks: list[float], powers: list[float]) -> dict:
    """A window's samples as the COLUMNS that come from samples (mean and minimum clock, mean power)."""
    return {
        "sm_clock_mhz": statistics.fmean(clocks) if clocks else None,
        "min_sm_clock_mhz": min(clocks) if clocks else None,
        "power_w": statistics.fmean(powers) if powers else None,
        "clock_samples": len(clocks),
    }


class ClockSampler:
    """Poll the SM clock and power of one GPU while a `with` block runs.

    `sampler.result` (a dict of COLUMNS) is filled when the block ends; a
    window shorter than one interval still gets one sample, taken at its end.
    `sampler.window(start, end)` summarizes the samples of a part of the
    block (times from time.perf_counter()).
    """

    def __init__(self, gpu_uuid: str | None = None, interval_s: float = 0.01):
        self.gpu_uuid = os.environ.get(UUID_ENV, "") if gpu_uuid is None else gpu_uuid
        self.interval_s = interval_s
        self.result: dict = dict.fromkeys(COLUMNS)
        self._times: list[float] = []
        self._clocks: list[float] = []
        self._powers: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None
        self._device = None

    def _sample(self) -> None:
        nvml = self._nvml
        with contextlib.suppress(Exception):
            clock = float(nvml.nvmlDeviceGetClockInfo(self._device, nvml.NVML_CLOCK_SM))
            power = nvml.nvmlDeviceGetPowerUsage(self._device) / 1e3
            self._times.append(time.perf_counter())
            self._clocks.append(clock)
            self._powers.append(power)

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> ClockSampler:
        self._nvml = _nvml()
        if self._nvml is None:
            return self
        try:
            self._device = _handle(self._nvml, self.gpu_uuid)
        except Exception:  # noqa: BLE001 - no GPU NVML can name: the columns stay empty
            self._nvml = None
            return self
        self._thread = threading.Thread(target=self._poll, name="gpu-clock-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._nvml is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._clocks:
            self._sample()
        nvml, device = self._nvml, self._device
        self.result = summarize(self._clocks, self._powers)
        self.result["max_sm_clock_mhz"] = _read(
            lambda: nvml.nvmlDeviceGetMaxClockInfo(device, nvml.NVML_CLOCK_SM)
        )
        limit = _read(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(device))
        self.result["power_limit_w"] = limit / 1e3 if limit is not None else None
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


    def window(self, start: float, end: float) -> dict:
        """The samples taken from `start` to `end` (or the first one after `start`), as `summarize` gives."""
        if self._nvml is None or not self._times:
            return dict.fromkeys(("sm_clock_mhz", "min_sm_clock_mhz", "power_w", "clock_samples"))
        first = bisect.bisect_left(self._times, start)
        last = max(bisect.bisect_right(self._times, end), min(first + 1, len(self._times)))
        return summarize(self._clocks[first:last], self._powers[first:last])


def _read(query):
    try:
        return float(query())
    except Exception:  # noqa: BLE001 - not supported on this GPU: empty
        return None

