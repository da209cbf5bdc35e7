"""The timers stop their clock only after the device has finished the step's work.

A GPU runs a step's kernels after the host has queued them: a timer that reads
the host clock without synchronizing first measures the launches, not the
work. On a CPU synchronization does nothing, so no CPU run can tell a timer
that forgot it. Here a fake GPU stands in for torch.cuda (the API the timers
reach the device through, lmstudy.measure.steps.synchronize) and for their host
clock: a step only queues work, which is done at synchronize() and not
before, so a timer sees the work's duration exactly when it synchronizes
before starting its clock and before stopping it.
"""

from __future__ import annotations

import pytest
import torch

from lmstudy.measure import attention, timing

GPU_S = 0.005  # the device's work of one step
HOST_S = 0.001  # the host's time to queue it: less, so the step is the device's
EARLIER_S = 0.020  # work queued before the timer starts (warm-up steps, a build)


class LateGPU:
    """torch.cuda of a GPU whose work is done only when the host waits for it, and the host's clock."""

    def __init__(self) -> None:
        self.now = 0.0  # the host clock, seconds
        self.done_at = 0.0  # when the work queued so far is finished

    def perf_counter(self) -> float:
        return self.now

    def launch(self, seconds: float) -> None:
        """Queue `seconds` of work, as a kernel launch does: it starts when the work before it is done."""
        self.done_at = max(self.done_at, self.now) + seconds

    def step(self) -> None:
        self.launch(GPU_S)
        self.now += HOST_S

    def synchronize(self, device=None) -> None:
        self.now = max(self.now, self.done_at)

    def max_memory_allocated(self, device=None) -> int:
        return 0

    max_memory_reserved = max_memory_allocated


@pytest.fixture
def gpu(monkeypatch) -> LateGPU:
    gpu = LateGPU()
    monkeypatch.setattr(torch, "cuda", gpu)
    for timer_module in (timing, attention):
        monkeypatch.setattr(timer_module, "time", gpu)  # their time.perf_counter()
    return gpu


CUDA = torch.device("cuda")  # only a name here: the fake answers for it


def test_each_timed_step_includes_its_late_work(gpu):
    gpu.launch(EARLIER_S)
    times, peaks = timing.trajectory(gpu.step, CUDA, 4)
    assert times == pytest.approx([GPU_S] * 4)
    assert peaks == [(0, 0)] * 4


def test_warm_up_work_stays_out_of_the_timed_steps(gpu):
    times = timing.time_steps(gpu.step, CUDA, warmup=3, steps=4)
    assert times == pytest.approx([GPU_S] * 4)


def test_the_attention_timer_includes_late_work_and_only_its_own(gpu):
    gpu.launch(EARLIER_S)
    assert attention._timed(gpu.step, CUDA) == pytest.approx(GPU_S)


def test_the_fake_gpu_tells_a_timer_that_does_not_synchronize(gpu):
    """The fake shows what a timer without synchronization would report: the launch, not the work."""
    start = gpu.perf_counter()
    gpu.step()
    assert gpu.perf_counter() - start == pytest.approx(HOST_S)
