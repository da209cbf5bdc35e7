"""The timers stop their clock only after the device has finished the step's work.

A GPU runs a step's kernels after the host has queued them: a timer that reads
the host clock without synchronizing first measures the launches, not the
work. On a CPU synchronization does nothing, so no CPU run can tell a timer
that forgot it. Here a fake GPU stands in for torch.cuda (the API the timers
reach the device through, lmstudy.measure.device_clock) and for their host
clock: a step only queues work, which is done at synchronize() and not
before, so a timer sees the work's duration exactly when it synchronizes
before starting its clock and before stopping it. The fake also keeps every
clock reading taken, once the device has had work, without a synchronize
just before it: one that happens to be right today (nothing was queued since
the last wait) is wrong as soon as something is.

The jobs' own timers are checked where they are: the timing job's build and
steps, the compile job's first step and build, the ladder's build and first
step. Only what would need a real device is faked there (opening it, the
step, the build's work, the profiled step).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch

from lmstudy.measure import attention, compile_bench, ladder_bench, timing
from lmstudy.measure.compile_bench import CompileSpec
from lmstudy.phases import PhaseClock

from .specs import spec_for

GPU_S = 0.005  # the device's work of one step
HOST_S = 0.001  # the host's time to queue it: less, so the step is the device's
EARLIER_S = 0.020  # work queued before the timer starts (warm-up steps, a build)
BUILD_S = 0.050  # the device's work of a model build (initialising its weights)
REAL_CUDA = torch.cuda


class LateGPU:
    """torch.cuda of a GPU whose work is done only when the host waits for it, and the host's clock."""

    def __init__(self) -> None:
        self.now = 0.0  # the host clock, seconds
        self.done_at = 0.0  # when the work queued so far is finished
        self.had_work = False
        self.waited = False  # a synchronize since the last launch or clock reading
        self.unsynchronized_readings: list[float] = []

    def perf_counter(self) -> float:
        if self.had_work and not self.waited:
            self.unsynchronized_readings.append(self.now)
        self.waited = False
        return self.now

    def launch(self, seconds: float) -> None:
        """Queue `seconds` of work, as a kernel launch does: it starts when the work before it is done."""
        self.done_at = max(self.done_at, self.now) + seconds
        self.had_work, self.waited = True, False

    def step(self) -> None:
        self.launch(GPU_S)
        self.now += HOST_S

    def synchronize(self, device=None) -> None:
        self.now = max(self.now, self.done_at)
        self.waited = True

    def build(self, *args, **kwargs) -> SimpleNamespace:
        """A model build: its work is queued on the device, as the weights' initialisation is."""
        self.launch(BUILD_S)
        self.now += HOST_S
        return SimpleNamespace(model=lambda inputs: inputs, drop_training_state=lambda: None)

    def max_memory_allocated(self, device=None) -> int:
        return 0

    max_memory_reserved = max_memory_allocated

    def reset_peak_memory_stats(self, device=None) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def __getattr__(self, name: str):
        """The rest of torch.cuda as it is (torch.compile's wrapper reads its types)."""
        return getattr(REAL_CUDA, name)


@pytest.fixture
def gpu(monkeypatch) -> LateGPU:
    gpu = LateGPU()
    monkeypatch.setattr(torch, "cuda", gpu)
    # Every host clock reads the fake's, wherever a timer reads it from.
    monkeypatch.setattr(time, "perf_counter", gpu.perf_counter)
    return gpu


@pytest.fixture
def on_the_fake(gpu, monkeypatch):
    """`on_the_fake(job_module)`: the job opens the fake GPU and its step is the fake's; its profiled
    step (a profiler needs a real device) runs and leaves its work queued, which no later timer may count."""

    def profiled_step(step, device) -> dict:
        step()
        return {"gpu_busy_ms": None, "kernels_per_step": None}

    def open_device(*args, **kwargs):
        """CUDA's start, waited for as lmstudy.measure.devices.initialize_device waits."""
        gpu.launch(EARLIER_S)
        gpu.synchronize()
        return CUDA, {"gpu": "fake"}

    def patch(module) -> None:
        monkeypatch.setattr(module, "open_device", open_device)
        monkeypatch.setattr(module, "make_step", lambda work, pass_name: gpu.step)
        monkeypatch.setattr(module, "gpu_measures", profiled_step)

    return patch


CUDA = torch.device("cuda")  # only a name here: the fake answers for it


def test_each_timed_step_includes_its_late_work(gpu):
    gpu.launch(EARLIER_S)
    times, peaks = timing.trajectory(gpu.step, CUDA, 4)
    assert times == pytest.approx([GPU_S] * 4)
    assert peaks == [(0, 0)] * 4
    assert gpu.unsynchronized_readings == []


def test_warm_up_work_stays_out_of_the_timed_steps(gpu):
    times = timing.time_steps(gpu.step, CUDA, warmup=3, steps=4)
    assert times == pytest.approx([GPU_S] * 4)
    assert gpu.unsynchronized_readings == []


def test_the_attention_timer_includes_late_work_and_only_its_own(gpu):
    gpu.launch(EARLIER_S)
    assert attention._timed(gpu.step, CUDA) == pytest.approx(GPU_S)
    assert gpu.unsynchronized_readings == []


def test_the_fake_gpu_tells_a_timer_that_does_not_synchronize(gpu):
    """The fake shows what a timer without synchronization would report: the launch, not the work."""
    start = gpu.perf_counter()
    gpu.step()
    assert gpu.perf_counter() - start == pytest.approx(HOST_S)
    assert gpu.unsynchronized_readings == [HOST_S]


def test_the_timing_job_times_its_build_and_each_step_with_their_late_work(gpu, on_the_fake, monkeypatch):
    on_the_fake(timing)
    monkeypatch.setattr(timing, "_build", gpu.build)
    spec = spec_for("timing", warmup_steps=(0, 1), timed_steps=2)
    result = timing.measure_pass(spec, "forward")
    assert result["build_s"] == pytest.approx(BUILD_S)
    assert result["step_s"] == pytest.approx([GPU_S] * spec.steps_per_process)
    assert gpu.unsynchronized_readings == []


def test_the_compile_job_times_its_build_and_first_step_with_their_late_work(gpu, on_the_fake, monkeypatch):
    on_the_fake(compile_bench)
    monkeypatch.setattr(CompileSpec, "build_workload", lambda spec, device: gpu.build())
    # The fake model has no operators to look at: what attention ran is not what this test times.
    monkeypatch.setattr(compile_bench, "attention_ran", lambda work, device: "fake")
    spec = spec_for("compile", passes=("forward", "train_step"), warmup_steps=1, timed_steps=2)
    clock = PhaseClock()
    rows = compile_bench.run_job(spec, clock)
    assert [(row["mode"], row["pass"], row["status"]) for row in rows] == [
        (mode, pass_name, "ok") for mode in ("eager", "compiled") for pass_name in spec.passes]
    for row in rows:
        assert row["first_step_ms"] == pytest.approx(GPU_S * 1e3)
        assert row["median_ms"] == pytest.approx(GPU_S * 1e3)
    assert clock.seconds["build"] == pytest.approx(2 * BUILD_S)  # one build per mode
    assert gpu.unsynchronized_readings == []


def test_the_ladder_times_its_build_and_first_step_with_their_late_work(gpu, on_the_fake, monkeypatch):
    on_the_fake(ladder_bench)
    monkeypatch.setattr(ladder_bench, "rung_workload", lambda spec, device: gpu.build())
    spec = spec_for("ladder", rung="bf16-sdpa", warmup_steps=1, timed_steps=2, profile_steps=0)
    clock = PhaseClock()
    row = ladder_bench.measure_rung(spec, clock)
    assert row["status"] == "ok"
    assert row["first_step_s"] == pytest.approx(GPU_S)
    assert row["median_ms"] == pytest.approx(GPU_S * 1e3)
    assert clock.seconds["build"] == pytest.approx(BUILD_S)
    assert gpu.unsynchronized_readings == []
