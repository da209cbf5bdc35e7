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

Each pass is measured in several such processes (lmstudy.measure.repeat:
at least two, more while their medians disagree), and each row reports the
median over processes with an interval from the variation between them
(lmstudy.analyse.stats.process_summary). Each process also samples the SM
clock while it steps (NVML), and the first one profiles one more step for
the GPU's busy time: with the median step time it says how much of the step
the GPU worked (host-bound steps measure the host, not the GPU).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable

import torch

from lmstudy import environment, hardware, rates
from lmstudy.analyse.stats import process_summary, summarize_ms
from lmstudy.measure.device_clock import now
from lmstudy.measure.devices import open_device, out_of_memory_is_a_result
from lmstudy.measure.factory import import_model_code
from lmstudy.measure.fresh_process import mark_forking_parent, run_forked
from lmstudy.measure.gpu_monitor import ClockSampler
from lmstudy.measure.gpu_time import gpu_measures
from lmstudy.measure.model_facts import ModelFacts, model_facts
from lmstudy.measure.repeat import NoisePolicy, gpu_columns, measure_until_stable
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import import_lazy_modules, make_step
from lmstudy.phases import PhaseClock
from lmstudy.plan import VARIANTS


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimingSpec(ModelSpec):
    # No defaults: config.yaml's timing: and noise:, through the job's spec (lmstudy.job_spec).
    variant: str
    passes: tuple[str, ...]
    warmup_steps: tuple[int, ...]
    timed_steps: int
    noise: NoisePolicy

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

    Each time is read from the device clock (lmstudy.measure.device_clock),
    so it covers the step's GPU work and nothing else: not the warm-up's.
    """
    for _ in range(warmup):
        step()
    return trajectory(step, device, steps)[0]


def trajectory(
    step: Callable[[], None], device: torch.device, steps: int, starts: list[float] | None = None
) -> tuple[list[float], list]:
    """Seconds of each of `steps` steps, each synchronized, and the peaks (allocated, reserved) after each.

    Each step's start (device_clock.now) is appended to `starts` where
    given. An out-of-memory error ends the trajectory early: the steps
    before it are returned and the error is raised as the exception's
    `trajectory`.
    """
    on_gpu = device.type == "cuda"
    times, peaks = [], []
    for _ in range(steps):
        start = now(device)
        if starts is not None:
            starts.append(start)
        try:
            step()
            end = now(device)
        except Exception as error:  # noqa: BLE001 - not caught: what was measured goes along
            error.trajectory = (times, peaks)
            raise
        times.append(end - start)
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


def measure_pass(spec: TimingSpec, pass_name: str, facts: dict | None = None, count: bool = False,
                 look: bool = False) -> dict:
    """One fresh process's trajectory of `pass_name` (run it in a fresh process).

    Plain data: per-step seconds and peaks, the phases' seconds, the
    environment (`facts`: environment.host_facts() of the parent), the SM
    clock in each warm-up's window, the GPU's busy ms and the kernels launched in one more step
    (CUDA only), and the error that ended the trajectory early. With `count`, also the model's FLOPs
    per pass, counted on the device after the measurement (`counted`: the meta device could not); with
    `look`, the attention the model ran (`attention_ran`: lmstudy.measure.factory.attention_run).
    """
    start = now(None)  # no device yet: starting it is what this region times
    device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb, facts)
    result = {"pass": pass_name, "device": device.type, "start_s": now(device) - start, "env": env,
              "step_s": [], "peak_allocated": [], "error": None, "build_s": 0.0, "clocks": {},
              "gpu_busy_ms": None, "kernels_per_step": None, "imports_s": 0.0, "profile_s": 0.0,
              "count_s": 0.0}
    start = now(device)
    import_model_code(spec.model, spec.dims, spec.context_length)
    result["imports_s"] = now(device) - start
    start = now(device)
    times, peaks, starts = [], [], []
    with out_of_memory_is_a_result(device) as oom, ClockSampler() as sampler:
        work = _build(spec, device)
        result["build_s"] = now(device) - start
        step = make_step(work, pass_name)
        times, peaks = trajectory(step, device, spec.steps_per_process, starts)
        profiled = now(device)
        result.update(gpu_measures(step, device))
        result["profile_s"] = now(device) - profiled
        if count:
            counting = now(device)
            result["counted"] = spec.count_on_device(work.model)
            result["count_s"] = now(device) - counting
        if look:
            looking = now(device)
            result["attention_ran"] = attention_ran(work, device)
            result["count_s"] += now(device) - looking
    if oom:
        if not result["build_s"]:
            result["build_s"] = now(device) - start
        times, peaks = oom.trajectory or ([], [])
        result["error"] = oom.message
    for warmup in spec.warmup_steps:
        window = starts[warmup: warmup + spec.timed_steps]
        if len(window) == spec.timed_steps and len(times) >= warmup + spec.timed_steps:
            end = window[-1] + times[warmup + spec.timed_steps - 1]
            result["clocks"][str(warmup)] = sampler.window(window[0], end)
    result["power_limit_w"] = sampler.result.get("power_limit_w")
    result["max_sm_clock_mhz"] = sampler.result.get("max_sm_clock_mhz")
    result["step_s"] = times
    result["peak_allocated"] = [allocated for allocated, _ in peaks]
    result["peak_reserved"] = [reserved for _, reserved in peaks]
    return result


def attention_ran(work, device: torch.device) -> str | None:
    """attention_run of the measured model, after its measurement; None where that forward does not fit."""
    from lmstudy.measure.devices import free_memory, is_out_of_memory
    from lmstudy.measure.factory import attention_run
    from lmstudy.measure.steps import autocast_context

    try:  # under the measured precision: SDPA chooses its kernel by the dtype, too
        with autocast_context(work.precision, work.device):
            return attention_run(getattr(work.model, "_orig_mod", work.model), work.inputs)
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        free_memory(device)
        return None


def _base_row(spec: TimingSpec, pass_name: str, warmup: int, facts: ModelFacts) -> dict:
    return {
        "size": spec.size, **spec.dims, "context_length": spec.context_length,
        "batch_size": spec.batch_size, "pass": pass_name, "precision": spec.precision,
        "variant": spec.variant, "warmup_steps": warmup, "timed_steps": spec.timed_steps,
        "params": facts.parameters,
        "matmul_params": facts.matmul_parameters,
        "flops_per_step": facts.flops_per_step.get(pass_name),
        "flops_counted_by": facts.counted_by,
        "model": spec.model.label,
    }


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _rounded_ms(seconds: list[float]) -> list[float]:
    return [round(t * 1e3, 4) for t in seconds]


def rows_from_processes(spec: TimingSpec, results: list[dict], facts: ModelFacts) -> list[dict]:
    """The rows of one pass measured in `results` (one per fresh process, in order).

    Warm-up w's row takes from each process the window of timed steps after
    its first w steps, and reports the median over processes with the
    interval of lmstudy.analyse.stats.process_summary; mean, std, CV and
    quantiles are over every step of every window. A window that no process
    reached (it ran out of memory first) is an OOM row, as a fresh process
    with that many warm-up steps would be.
    """
    first = results[0]
    env = first["env"]
    on_gpu = first["device"] == "cuda"
    peak_tflops = hardware.peak_tflops(env["gpu"], spec.precision, spec.tf32) if on_gpu else None
    gpu = gpu_columns(results)
    rows = []
    for warmup in sorted(spec.warmup_steps):
        row = _base_row(spec, first["pass"], warmup, facts)
        windows = [r["step_s"][warmup: warmup + spec.timed_steps] for r in results]
        complete = [w for w in windows if len(w) == spec.timed_steps]
        row.update(
            first_step_ms=_median([r["step_s"][0] * 1e3 for r in results if r["step_s"]]),
            trajectory_ms=json.dumps([_rounded_ms(r["step_s"]) for r in results]),
            start_s=_median([r["start_s"] for r in results]),
            fork_s=_median([r.get("fork_s") for r in results]),
            build_s=_median([r["build_s"] for r in results]),
            steps_run=max(len(r["step_s"]) for r in results), peak_tflops=peak_tflops,
            processes=len(complete), power_limit_w=first.get("power_limit_w"),
            max_sm_clock_mhz=first.get("max_sm_clock_mhz"),
            attention_ran=next((r["attention_ran"] for r in results if r.get("attention_ran")), None),
            mfu_peak=hardware.peak_unit(spec.precision, spec.tf32),  # what mfu divides by
        )
        # The first process compiled from scratch; the later ones found its work in the job's cache.
        row["compile_s"] = compile_seconds(first["step_s"]) if spec.compiled else None
        if not complete or len(complete) < len(windows):
            error = next((r["error"] for r in results if r["error"]), None)
            row.update(status="OOM", error=error or "the trajectory ended early", processes=len(windows))
        else:
            _add_window_statistics(row, spec, results, complete, warmup, gpu, peak_tflops)
        row.update(env)
        rows.append(row)
    return rows


def _add_window_statistics(row: dict, spec: TimingSpec, results: list[dict], complete: list[list[float]],
                           warmup: int, gpu: dict, peak_tflops: float | None) -> None:
    """Fill in an ok row of warm-up `warmup` from every process's complete window of timed steps
    (`complete`): the step statistics over every step, the median over processes with its interval,
    the rates, the GPU's busy share and clocks over the window, and the memory peak at its end."""
    every_step = [t for w in complete for t in w]
    row.update(status="ok", **summarize_ms(every_step))
    summary = process_summary([_rounded_ms(w) for w in complete])
    row.update(
        median_ms=summary["median"], ci_low_ms=summary["ci_low"], ci_high_ms=summary["ci_high"],
        process_spread=summary["spread"],
        process_medians_ms=json.dumps([round(m, 4) for m in summary["process_medians"]]),
    )
    row["step_times_ms"] = json.dumps([_rounded_ms(w) for w in complete])
    row.update(rates.step_rates(row["median_ms"], tokens=spec.batch_size * spec.context_length,
                                flops=row["flops_per_step"], peak_tflops=peak_tflops))
    row.update(gpu)
    busy_ms = gpu["gpu_busy_ms"]
    row["gpu_busy_share"] = min(1.0, busy_ms / row["median_ms"]) if busy_ms is not None else None
    clocks = [r["clocks"].get(str(warmup), {}) for r in results]
    row["sm_clock_mhz"] = _median([c.get("sm_clock_mhz") for c in clocks])
    row["min_sm_clock_mhz"] = min((c["min_sm_clock_mhz"] for c in clocks
                                   if c.get("min_sm_clock_mhz") is not None), default=None)
    row["power_w"] = _median([c.get("power_w") for c in clocks])
    # The peak a fresh process reaches by the end of this window (the largest over processes).
    end = warmup + spec.timed_steps - 1
    row["peak_allocated_bytes"] = max(r["peak_allocated"][end] or 0 for r in results) or None
    row["peak_reserved_bytes"] = max(r["peak_reserved"][end] or 0 for r in results) or None


def run_job(spec: TimingSpec, clock: PhaseClock | None = None) -> list[dict]:
    """All rows of one job: each pass in fresh processes forked from this one, until they agree.

    This process neither initialises CUDA nor runs the user's model code
    (each child does, afresh): the model's counts come from a counting child
    (lmstudy.measure.model_facts), and every fork is checked first.
    """
    mark_forking_parent()
    clock = clock or PhaseClock()
    with clock.timing("imports"):
        import_lazy_modules()  # once here, not in every fresh process's build
    with clock.timing("count"):  # the counting child builds the model on the meta device to count it
        model = model_facts(spec)
    facts = environment.host_facts()  # git and nvidia-smi once, not in every fresh process
    if model.not_applicable:  # an attention the model cannot switch to: a row that says so, nothing measured
        return _not_applicable_rows(spec, model, facts)
    steady = max(spec.warmup_steps)

    def measure(passes: list[str], round_index: int) -> dict[str, dict]:
        nonlocal model
        measured = {}
        for pass_name in passes:
            what = (f"process {round_index + 1} of the {pass_name} pass of {spec.size} ctx "
                    f"{spec.context_length} {spec.precision} {spec.variant}")
            started = time.perf_counter()
            # Until a process has counted the FLOPs on the device (where the meta device cannot), the
            # next one counts them, after its measurement.
            result = run_forked(measure_pass, spec, pass_name, facts, model.on_device, round_index == 0,
                                what=what)
            result["process_s"] = time.perf_counter() - started
            if result.get("counted") is not None:
                model = model.with_counts(result["counted"])
            _account(clock, spec, result)
            _print_progress(spec, pass_name, round_index, result, steady)
            measured[pass_name] = result
        return measured

    def steady_window(result: dict) -> list[float] | None:
        window = result["step_s"][steady: steady + spec.timed_steps]
        return window if len(window) == spec.timed_steps else None

    def gpu_busy_s(result: dict) -> float | None:  # in the steady window's unit
        return result["gpu_busy_ms"] / 1e3 if result.get("gpu_busy_ms") is not None else None

    by_pass = measure_until_stable(measure, list(spec.passes), steady_window, spec.noise,
                                   progress=lambda line: print(line, flush=True), clock=clock,
                                   gpu_busy_of=gpu_busy_s)
    model = model.with_counts(None) if model.on_device else model  # no process could count them
    return _rows_of_passes(spec, by_pass, model)


def _not_applicable_rows(spec: TimingSpec, model: ModelFacts, facts: dict) -> list[dict]:
    """The job's rows where the model cannot switch to the spec's attention: one per pass and warm-up,
    saying so (the counting child's sentence), with nothing measured."""
    return [{**_base_row(spec, pass_name, warmup, model), "status": "not applicable",
             "error": model.not_applicable, "processes": 0, **facts}
            for pass_name in spec.passes for warmup in sorted(spec.warmup_steps)]


def _print_progress(spec: TimingSpec, pass_name: str, round_index: int, result: dict, steady: int) -> None:
    """One line in the job's log for a fresh process that is done: its steps, its time, the median
    of its steady window (after the largest warm-up) and its error, if any."""
    window = result["step_s"][steady: steady + spec.timed_steps]
    print(f"{pass_name}, process {round_index + 1}: {len(result['step_s'])} steps in "
          f"{result['process_s']:.1f} s"
          + (f", steady median {statistics.median(window) * 1e3:.3f} ms" if window else "")
          + (f", {result['error']}" if result["error"] else ""), flush=True)


def _rows_of_passes(spec: TimingSpec, by_pass: dict[str, list[dict]], model: ModelFacts) -> list[dict]:
    """Every pass's rows from its processes' results, in the spec's order of passes; each row with the
    time all of that pass's processes took."""
    rows = []
    for pass_name in spec.passes:
        results = by_pass[pass_name]
        pass_rows = rows_from_processes(spec, results, model)
        for row in pass_rows:
            row["process_s"] = sum(r["process_s"] for r in results)
        rows += pass_rows
    return rows


def _account(clock: PhaseClock, spec: TimingSpec, result: dict) -> None:
    """Add one process's phases to the job's: start, build, compile and measure."""
    times = result["step_s"]
    compile_s = compile_seconds(times) if spec.compiled else 0.0
    steps_s = sum(times) - compile_s
    clock.add("start", result["fork_s"] + result["start_s"])
    clock.add("model_imports", result.get("imports_s", 0.0))
    clock.add("count", result.get("count_s", 0.0))
    clock.add("build", result["build_s"])
    clock.add("profile", result.get("profile_s", 0.0))
    clock.add("compile", compile_s)
    clock.add("measure", steps_s)


def compile_seconds(step_seconds: list[float]) -> float:
    """torch.compile traces and compiles in the first call: its excess over the median step."""
    if not step_seconds:
        return 0.0
    return max(0.0, step_seconds[0] - statistics.median(step_seconds))
