"""The profiled program: warm up outside the capture, then profile N steps of each pass.

One process profiles every pass of a configuration (forward, then the
training step): it builds the model once, runs every pass's warm-up (the last
pass's first, so that the first pass captured has just warmed up), frees the
gradients, and only then starts the one capture, in which each pass's
profiled steps run inside a range of their own
(lmstudy.ranges.profiled_pass_range); the analysis splits the capture by
those ranges. The forward is thus profiled with AdamW's state in memory.
So the warm-up stays out of the capture, and a configuration pays for one
process start, one model build and one report, not one per pass.

Under Nsight Systems (backend "nsys") the capture is the cudaProfilerApi
range: nsys runs with ``--capture-range=cudaProfilerApi`` and records only
between cudaProfilerStart and cudaProfilerStop. Under torch.profiler (backend
"torch") the profiler is entered after the warm-up and its Chrome trace
written at the end. Either way the steps are the timing section's
(lmstudy.measure.steps), synchronized after each one, with the same NVTX /
record_function ranges.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path

import torch

from lmstudy.measure.device_clock import now, phase
from lmstudy.measure.devices import free_memory, open_device, out_of_memory_is_a_result
from lmstudy.measure.markers import annotate
from lmstudy.measure.module_ranges import module_ranges
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import Workload, make_step
from lmstudy.phases import PhaseClock
from lmstudy.ranges import profiled_pass_range

BACKENDS = ("nsys", "torch")
# The passes section 2 can profile (a spec's `passes` gives their order).
PROFILED_PASSES = ("forward", "train_step")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileSpec(ModelSpec):
    # No defaults: config.yaml's nsys:, through the job's spec (lmstudy.job_spec); the backend is
    # the nsys_backend job's answer.
    passes: tuple[str, ...]
    warmup_steps: int
    profiled_steps: int
    backend: str

    def __post_init__(self):
        unknown = [p for p in self.passes if p not in PROFILED_PASSES]
        if not self.passes or unknown or len(set(self.passes)) != len(self.passes):
            raise ValueError(f"passes must be distinct ones of {PROFILED_PASSES}, not {self.passes!r}")

    def columns(self, pass_name: str) -> dict:
        """The configuration of `pass_name` as result columns."""
        return {
            "size": self.size,
            "context_length": self.context_length,
            "pass": pass_name,
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
            "model": self.model.label,
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


def run_profile(
    spec: ProfileSpec, trace: Path | None = None, clock: PhaseClock | None = None
) -> dict[str, dict]:
    """Warm up every pass, then capture `profiled_steps` of each; a record per pass.

    `trace` is where the torch backend writes its Chrome trace (.json or
    .json.gz). Out of memory is a record with status OOM: in the build for
    every pass, in a pass's warm-up or profiled steps for that pass, whose
    gradients and optimizer state are then freed so that the other passes go
    on. `clock` gets the phases: start, build, measure (the torch backend's
    trace export counts as profile).
    """
    if spec.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {spec.backend!r}")
    if spec.backend == "torch" and trace is None:
        raise ValueError("the torch backend needs a trace path")
    clock = clock or PhaseClock()
    with clock.timing("start"):
        device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    records = {
        name: {**spec.columns(name), **env, "status": "ok", "error": "", "captured_step_ms": []}
        for name in spec.passes
    }
    started = now(device)
    with out_of_memory_is_a_result(device) as oom:
        work = spec.build_workload(device, with_optimizer="train_step" in spec.passes)
    clock.add("build", now(device) - started)
    if oom:
        for record in records.values():
            record.update(oom.fields())
        return records

    def out_of_memory(name: str, oom) -> None:
        records[name].update(oom.fields(), captured_step_ms=[])
        if name == "train_step":
            # Only the training step holds gradients and optimizer state.
            work.drop_training_state()
            free_memory(device)

    steps = _warm_up_passes(spec, work, device, clock, out_of_memory)
    _capture_passes(spec, work, steps, records, device, clock, trace, out_of_memory)
    return records


def _warm_up_passes(spec: ProfileSpec, work: Workload, device: torch.device, clock: PhaseClock,
                    out_of_memory: Callable[[str, object], None]) -> dict[str, Callable]:
    """Every pass's warm-up steps, outside the capture; the step of each pass that did not run out
    of memory (one that did goes to `out_of_memory(name, oom)`), by name.

    Ends with no gradients and with the device synchronized (the clock's
    "measure" phase), so no warm-up work runs on into the capture.
    """
    steps = {}
    # The phase ends synchronized: no warm-up work runs on into the capture.
    with phase(clock, "measure", device):
        # Warm-ups in reverse order, so that the first pass captured is the one
        # that has just warmed up; the later ones keep their state (AdamW's).
        for name in reversed(spec.passes):
            with out_of_memory_is_a_result(device) as oom:
                step = make_step(work, name)
                for _ in range(spec.warmup_steps):
                    step()
            if oom:
                out_of_memory(name, oom)
            else:
                steps[name] = step
        # A training step sets its gradients to None first anyway; the passes
        # before it are profiled without them. Their memory stays in the
        # allocator's cache: emptying it would put cudaMallocs in the capture.
        work.model.zero_grad(set_to_none=True)
    return steps


def _capture_passes(spec: ProfileSpec, work: Workload, steps: dict[str, Callable], records: dict[str, dict],
                    device: torch.device, clock: PhaseClock, trace: Path | None,
                    out_of_memory: Callable[[str, object], None]) -> None:
    """The one capture: `profiled_steps` of each warmed-up pass in `spec.passes`' order, each pass in
    its own range, each step's time appended to its record's "captured_step_ms".

    The clock's "measure" phase ends with the last step, inside the capture;
    what follows, the capture's end (the torch backend's trace export), is "profile".
    """
    capture = (
        cuda_profiler_range(device) if spec.backend == "nsys" else torch_profiler_capture(device, Path(trace))
    )
    started = now(device)
    # Module ranges in the capture only: its warm-up ran without their cost.
    # A step that runs out of memory leaves none of them open (ModuleRanges.step).
    with capture, module_ranges(work.model, spec.model.range_depth) as ranges:
        for name, step in sorted(steps.items(), key=lambda item: spec.passes.index(item[0])):
            with out_of_memory_is_a_result(device) as oom, annotate(profiled_pass_range(name)):
                for _ in range(spec.profiled_steps):
                    start = now(device)
                    ranges.step(step, device)
                    records[name]["captured_step_ms"].append((now(device) - start) * 1e3)
            if oom:
                out_of_memory(name, oom)
        ended = now(device)
        clock.add("measure", ended - started)
        started = ended
    clock.add("profile", now(device) - started)
