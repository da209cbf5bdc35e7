"""The profiled program: warm up outside the capture, then profile N steps.

Under Nsight Systems (backend "nsys") the capture is the cudaProfilerApi
range: nsys runs with ``--capture-range=cudaProfilerApi`` and records only
between cudaProfilerStart and cudaProfilerStop, which this program calls
after the warm-up. Under torch.profiler (backend "torch") the profiler is
entered after the warm-up and its Chrome trace written at the end. Either
way the steps are the timing section's (lmstudy.measure.steps), synchronized after
each one, with the same NVTX / record_function ranges.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

import torch

from lmstudy.measure.devices import open_device, out_of_memory_is_a_result
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import make_step, synchronize
from lmstudy.phases import PhaseClock

BACKENDS = ("nsys", "torch")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileSpec(ModelSpec):
    pass_name: str
    batch_size: int = 4
    vocab_size: int = 10000
    warmup_steps: int = 2
    profiled_steps: int = 2
    backend: str = "nsys"

    def columns(self) -> dict:
        """The configuration as result columns."""
        return {
            "size": self.size,
            "context_length": self.context_length,
            "pass": self.pass_name,
            "precision": self.precision,
            "batch_size": self.batch_size,
            "backend": self.backend,
            "warmup_steps": self.warmup_steps,
            "profiled_steps": self.profiled_steps,
            "d_model": self.d_model,
            "d_ff": self.d_ff,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "vocab_size": self.vocab_size,
        }


@contextlib.contextmanager
def cuda_profiler_range(device: torch.device):
    """cudaProfilerStart/Stop: the capture range of `nsys --capture-range=cudaProfilerApi`."""
    if device.type != "cuda":
        yield
        return
    torch.cuda.cudart().cudaProfilerStart()
    try:
        yield
    finally:
        torch.cuda.cudart().cudaProfilerStop()


def torch_profiler_capture(device: torch.device, trace: Path):
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)

    @contextlib.contextmanager
    def capture():
        with torch.profiler.profile(activities=activities) as prof:
            yield
        trace.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace))

    return capture()


def run_profile(spec: ProfileSpec, trace: Path | None = None, clock: PhaseClock | None = None) -> dict:
    """Warm up, capture `profiled_steps` steps; return the run's record.

    `trace` is where the torch backend writes its Chrome trace (.json or
    .json.gz). Out-of-memory, in the build, the warm-up or the capture, is a
    record with status OOM. `clock` gets the phases: start, build, measure
    (the torch backend's trace export counts as profile).
    """
    if spec.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {spec.backend!r}")
    clock = clock or PhaseClock()
    with clock.timing("start"):
        device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
        record = {**spec.columns(), **env, "status": "ok", "error": ""}
    step_ms: list[float] = []
    phase = "build"
    started = time.perf_counter()
    with out_of_memory_is_a_result(device) as oom:
        work = spec.build_workload(device, with_optimizer=spec.pass_name == "train_step")
        synchronize(device)
        clock.add("build", time.perf_counter() - started)
        phase, started = "measure", time.perf_counter()
        step = make_step(work, spec.pass_name)
        for _ in range(spec.warmup_steps):
            step()
        synchronize(device)
        if spec.backend == "nsys":
            capture = cuda_profiler_range(device)
        else:
            if trace is None:
                raise ValueError("the torch backend needs a trace path")
            capture = torch_profiler_capture(device, Path(trace))
        with capture:
            for _ in range(spec.profiled_steps):
                start = time.perf_counter()
                step()
                synchronize(device)
                step_ms.append((time.perf_counter() - start) * 1e3)
            clock.add("measure", time.perf_counter() - started)
            phase, started = "profile", time.perf_counter()
        clock.add("profile", time.perf_counter() - started)
    if oom:
        clock.add(phase, time.perf_counter() - started)
        record.update(oom.fields())
    record["captured_step_ms"] = step_ms
    return record
