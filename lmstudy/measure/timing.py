"""End-to-end timing of one model configuration (section 1).

Warm-up w means w untimed steps in a fresh process, then the timed steps.
One fresh process per pass runs max(warm-ups) + timed steps and times every
step, synchronizing the device after each: its trajectory. The row for
warm-up w is the window of timed steps after the first w steps of that
trajectory, which is exactly what a fresh process with w warm-up steps would
time. Warm-up 0 is the cold start: CUDA initialisation, the model build and
the first steps, but not the interpreter's start or `import torch` (the
fresh process is forked from the job's process, which imported torch and
never touched CUDA: lmstudy.measure.fresh_process).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable

import torch

from lmstudy import environment, flops, hardware
from lmstudy.analyse.stats import summarize_ms
from lmstudy.measure.devices import open_device, out_of_memory_is_a_result
from lmstudy.measure.fresh_process import run_forked
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import PASSES, import_lazy_modules, make_step, synchronize
from lmstudy.phases import PhaseClock

VARIANTS = ("naive", "sdpa", "naive-compile", "sdpa-compile")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingSpec(ModelSpec):
    variant: str = "naive"
    passes: tuple[str, ...] = PASSES
    warmup_steps: tuple[int, ...] = (0, 1, 5)
    timed_steps: int = 10

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, not {self.variant!r}")

    @property
    def model_attention(self) -> str:
        return self.variant.split("-")[0]

    @property
    def compiled(self) -> bool:
        return self.variant.endswith("-compile")

    @property
    def steps_per_process(self) -> int:
        """Steps one fresh process runs: enough for the largest warm-up's window."""
        return max(self.warmup_steps) + self.timed_steps


def time_steps(step: Callable[[], None], device: torch.device, warmup: int, steps: int) -> list[float]:
    """Seconds per step: `warmup` untimed steps, then `steps` timed ones.

    The device is synchronized before the clock starts and after every step,
    so each time covers the step's GPU work and nothing else.
    """
    for _ in range(warmup):
        step()
    synchronize(device)
    return trajectory(step, device, steps)[0]


def trajectory(step: Callable[[], None], device: torch.device, steps: int) -> tuple[list[float], list]:
    """Seconds of each of `steps` steps, each synchronized, and the peaks (allocated, reserved) after each.

    An out-of-memory error ends the trajectory early: the steps before it
    are returned and the error is raised as the exception's `trajectory`.
    """
    on_gpu = device.type == "cuda"
    times, peaks = [], []
    synchronize(device)
    for _ in range(steps):
        start = time.perf_counter()
        try:
            step()
            synchronize(device)
        except Exception as error:  # noqa: BLE001 - not caught: what was measured goes along
            error.trajectory = (times, peaks)
            raise
        times.append(time.perf_counter() - start)
        # Peaks so far, allocated and reserved: what a fresh process running this many steps reports.
        peaks.append(
            (torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))
            if on_gpu else (None, None)
        )
    return times, peaks


def _build(spec: TimingSpec, device: torch.device):
    work = spec.build_workload(device)
    if spec.compiled:
        work.model = torch.compile(work.model)
    return work


def measure_pass(spec: TimingSpec, pass_name: str, facts: dict | None = None) -> dict:
    """One fresh process's trajectory of `pass_name` (run it in a fresh process).

    Plain data: per-step seconds and peaks, the phases' seconds, the
    environment (`facts`: environment.host_facts() of the parent), and the
    error that ended the trajectory early, if any.
    """
    start = time.perf_counter()
    device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb, facts)
    result = {"pass": pass_name, "device": device.type, "start_s": time.perf_counter() - start, "env": env,
              "step_s": [], "peak_allocated": [], "error": None, "build_s": 0.0}
    start = time.perf_counter()
    times, peaks = [], []
    with out_of_memory_is_a_result(device) as oom:
        work = _build(spec, device)
        synchronize(device)
        result["build_s"] = time.perf_counter() - start
        step = make_step(work, pass_name)
        times, peaks = trajectory(step, device, spec.steps_per_process)
    if oom:
        if not result["build_s"]:
            result["build_s"] = time.perf_counter() - start
        times, peaks = oom.trajectory or ([], [])
        result["error"] = oom.message
    result["step_s"] = times
    result["peak_allocated"] = [allocated for allocated, _ in peaks]
    result["peak_reserved"] = [reserved for _, reserved in peaks]
    return result


def _base_row(spec: TimingSpec, pass_name: str, warmup: int, params: int) -> dict:
    return {
        "size": spec.size, **spec.dims, "context_length": spec.context_length,
        "batch_size": spec.batch_size, "pass": pass_name, "precision": spec.precision,
        "variant": spec.variant, "warmup_steps": warmup, "timed_steps": spec.timed_steps,
        "params": params,
        "flops_per_step": flops.flops_per_step(pass_name, spec.batch_size, spec.context_length, **spec.dims),
    }


def rows_from_trajectory(spec: TimingSpec, result: dict, params: int) -> list[dict]:
    """The rows of one pass: for warm-up w, the timed window after the trajectory's first w steps.

    A window the trajectory did not reach (it ran out of memory first) is an
    OOM row, as a fresh process with that many warm-up steps would be.
    """
    times, peaks = result["step_s"], result["peak_allocated"]
    env = result["env"]
    on_gpu = result["device"] == "cuda"
    peak_tflops = hardware.peak_tflops(env["gpu"], spec.precision, spec.tf32) if on_gpu else None
    rows = []
    for warmup in sorted(spec.warmup_steps):
        row = _base_row(spec, result["pass"], warmup, params)
        window = times[warmup: warmup + spec.timed_steps]
        row.update(
            first_step_ms=times[0] * 1e3 if times else None,
            trajectory_ms=json.dumps([round(t * 1e3, 4) for t in times]),
            start_s=result["start_s"], fork_s=result.get("fork_s"), build_s=result["build_s"],
            steps_run=len(times), peak_tflops=peak_tflops,
            mfu_peak=hardware.peak_unit(spec.precision, spec.tf32),  # what mfu divides by
        )
        row["compile_s"] = compile_seconds(times) if spec.compiled else None
        if len(window) < spec.timed_steps:
            row.update(status="OOM", error=result["error"] or "the trajectory ended early")
        else:
            row.update(status="ok", **summarize_ms(window))
            row["step_times_ms"] = json.dumps([round(t * 1e3, 4) for t in window])
            seconds = row["median_ms"] / 1e3
            row["tokens_per_s"] = spec.batch_size * spec.context_length / seconds
            row["achieved_tflops"] = row["flops_per_step"] / seconds / 1e12
            row["mfu"] = row["achieved_tflops"] / peak_tflops if peak_tflops else None
            # The peak a fresh process reaches by the end of this window.
            row["peak_allocated_bytes"] = peaks[warmup + spec.timed_steps - 1]
            row["peak_reserved_bytes"] = result["peak_reserved"][warmup + spec.timed_steps - 1]
        row.update(env)
        rows.append(row)
    return rows


def run_job(spec: TimingSpec, clock: PhaseClock | None = None) -> list[dict]:
    """All rows of one job: one fresh process per pass, forked from this one.

    This process must not initialise CUDA: each child initialises it afresh.
    """
    if torch.cuda.is_initialized():
        raise RuntimeError("run_job must start in a process that has not initialised CUDA: "
                           "each pass's fresh process is forked from it and initialises CUDA itself")
    clock = clock or PhaseClock()
    with clock.timing("imports"):
        import_lazy_modules()  # once here, not in every fresh process's build
    params = spec.parameter_count()
    facts = environment.host_facts()  # git and nvidia-smi once, not in every fresh process
    rows = []
    for pass_name in spec.passes:
        what = (f"the {pass_name} process of {spec.size} ctx {spec.context_length} "
                f"{spec.precision} {spec.variant}")
        started = time.perf_counter()
        result = run_forked(measure_pass, spec, pass_name, facts, what=what)
        result["process_s"] = time.perf_counter() - started
        _account(clock, spec, result)
        pass_rows = rows_from_trajectory(spec, result, params)
        for row in pass_rows:
            row["process_s"] = result["process_s"]
        rows += pass_rows
        # Progress in the job's log: which fresh processes are done.
        print(f"{pass_name}: {len(result['step_s'])} steps in a fresh process of "
              f"{result['process_s']:.1f} s" + (f", {result['error']}" if result["error"] else ""),
              flush=True)
    return rows


def _account(clock: PhaseClock, spec: TimingSpec, result: dict) -> None:
    """Add one process's phases to the job's: start, build, compile and measure."""
    times = result["step_s"]
    compile_s = compile_seconds(times) if spec.compiled else 0.0
    steps_s = sum(times) - compile_s
    clock.add("start", result["fork_s"] + result["start_s"])
    clock.add("build", result["build_s"])
    clock.add("compile", compile_s)
    clock.add("measure", steps_s)


def compile_seconds(step_seconds: list[float]) -> float:
    """torch.compile traces and compiles in the first call: its excess over the median step."""
    if not step_seconds:
        return 0.0
    return max(0.0, step_seconds[0] - statistics.median(step_seconds))
