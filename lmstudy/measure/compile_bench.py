"""The whole model eager vs under torch.compile (section 6).

One job measures one (size, context length, precision, attention) for each
pass, first eager and then compiled, in one process and from the same
initial weights. For each it times the first step alone (for the compiled
model that step traces and compiles: its excess over the steady median is
the compile time, shown apart), then warm-up steps, then timed steps.

Eager runs first, so the one-off costs of the process (CUDA context, library
handles) fall on the eager first step and not on the compile time.
"""

from __future__ import annotations

import dataclasses
import json

import torch

from lmstudy import hardware, rates
from lmstudy.analyse.stats import summarize_ms
from lmstudy.measure.device_clock import now, phase
from lmstudy.measure.devices import free_memory, open_device, out_of_memory_is_a_result
from lmstudy.measure.factory import import_model_code
from lmstudy.measure.fresh_process import mark_forking_parent
from lmstudy.measure.gpu_time import gpu_measures
from lmstudy.measure.model_facts import ModelFacts, counted_here, model_facts
from lmstudy.measure.repeat import NoisePolicy, combine_processes, forked_with_phases, measure_until_stable
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import Workload, make_step
from lmstudy.measure.timing import attention_ran, time_steps
from lmstudy.phases import PhaseClock

MODES = ("eager", "compiled")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompileSpec(ModelSpec):
    # No defaults: config.yaml's compile:, through the job's spec (lmstudy.job_spec).
    attention: str
    passes: tuple[str, ...]
    warmup_steps: int
    timed_steps: int

    @property
    def model_attention(self) -> str:
        return self.attention


def _measure_pass(spec: CompileSpec, work, pass_name: str, device: torch.device) -> dict:
    row: dict = {}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step = make_step(work, pass_name)
    start = now(device)
    step()
    row["first_step_ms"] = (now(device) - start) * 1e3
    times = time_steps(step, device, spec.warmup_steps, spec.timed_steps)
    row.update(status="ok", **summarize_ms(times))
    # Every step, so that rows of several processes combine (lmstudy.measure.repeat).
    row["step_times_ms"] = json.dumps([round(t * 1e3, 6) for t in times])
    row.update(gpu_measures(step, device))  # one more step, profiled: GPU time and kernels per step
    row["tokens_per_s"] = rates.tokens_per_second(spec.batch_size * spec.context_length, ms=row["median_ms"])
    # The first step's excess over the steady state: tracing and compiling
    # for the compiled model, one-off initialisation for the eager one.
    row["first_step_excess_s"] = (row["first_step_ms"] - row["median_ms"]) / 1e3
    on_gpu = device.type == "cuda"
    row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device) if on_gpu else None
    return row


def run_job(spec: CompileSpec, clock: PhaseClock | None = None) -> list[dict]:
    """Rows for each mode x pass; out-of-memory rows carry the error.

    `clock` gets the phases: start, build, compile (the compiled model's
    first steps' excess over its steady median) and measure.
    """
    clock = clock or PhaseClock()
    with clock.timing("start"):
        device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    peak = hardware.peak_tflops(env["gpu"], spec.precision, spec.tf32) if device.type == "cuda" else None
    with phase(clock, "model_imports", device):
        import_model_code(spec.model, spec.dims, spec.context_length)
    with phase(clock, "count", device):
        facts = counted_here(spec)  # a model too large to count gives no FLOPs, and OOM rows below
    rows = []
    for mode in MODES:
        torch._dynamo.reset()
        work = None
        started = now(device)
        with out_of_memory_is_a_result(device) as build_oom:
            work = spec.build_workload(device)
            if mode == "compiled":
                work.model = torch.compile(work.model)
        clock.add("build", now(device) - started)
        for pass_name in spec.passes:
            row = _row_description(spec, mode, pass_name, facts, peak)
            if build_oom:
                row.update(build_oom.fields())
            else:
                _measure_pass_into(row, spec, work, mode, pass_name, device, clock)
            row.update(env)
            rows.append(row)
        if mode == "eager" and not build_oom:  # what a user's model runs is its factory's choice
            with phase(clock, "count", device):
                ran = attention_ran(work, device)
            for row in rows[-len(spec.passes):]:
                row["attention_ran"] = ran
        if facts.on_device and not build_oom:  # the meta device could not count: the measured model can
            with phase(clock, "count", device):
                facts = facts.with_counts(spec.count_on_device(work.model))
        del work
        free_memory(device)
    facts = facts.with_counts(None)  # where no build fitted to count on
    _add_flops_and_rates(rows, facts, peak)
    return rows


def _row_description(spec: CompileSpec, mode: str, pass_name: str, facts: ModelFacts,
                    peak: float | None) -> dict:
    """The fields of a row that say what was measured (configuration, mode, pass, steps, the FLOPs
    counted so far and the peak its MFU divides by): every row has them, whatever its status."""
    return {
        "size": spec.size,
        **spec.dims,
        "context_length": spec.context_length,
        "batch_size": spec.batch_size,
        "precision": spec.precision,
        "attention": spec.attention,
        "mode": mode,
        "pass": pass_name,
        "warmup_steps": spec.warmup_steps,
        "timed_steps": spec.timed_steps,
        "flops_per_step": facts.flops_per_step.get(pass_name),
        "peak_tflops": peak,
        "mfu_peak": hardware.peak_unit(spec.precision, spec.tf32),  # what mfu divides by
    }


def _measure_pass_into(row: dict, spec: CompileSpec, work: Workload, mode: str, pass_name: str,
                       device: torch.device, clock: PhaseClock) -> None:
    """Measure one pass of a built model into `row`; out of memory is the row's result, and frees the
    training state so that the next pass can run.

    Its time goes to the clock: the compiled model's first step's excess
    over its steady median (at most the time spent) as "compile", the rest as "measure".
    """
    started = now(device)
    with out_of_memory_is_a_result() as oom:
        row.update(_measure_pass(spec, work, pass_name, device))
    if oom:
        row.update(oom.fields())
        work.drop_training_state()
        free_memory(device)
    spent = now(device) - started
    compiling = max(0.0, row.get("first_step_excess_s") or 0.0) if mode == "compiled" else 0.0
    clock.add("compile", min(compiling, spent))
    clock.add("measure", spent - min(compiling, spent))


def _add_flops_and_rates(rows: list[dict], facts: ModelFacts, peak: float | None) -> None:
    """Fill in the FLOPs a row lacked where they were counted on the device after it was measured,
    then each measured row's achieved TFLOP/s and its share of the peak (MFU)."""
    for row in rows:
        if row["flops_per_step"] is None and facts.flops_per_step:
            row["flops_per_step"] = facts.flops_per_step.get(row["pass"])
        if row["status"] == "ok":
            row["achieved_tflops"] = rates.achieved_tflops(row["flops_per_step"], ms=row["median_ms"])
            row["mfu"] = rates.share_of_peak(row["achieved_tflops"], peak)


def run_job_in_processes(
    spec: CompileSpec, policy: NoisePolicy, clock: PhaseClock | None = None
) -> list[dict]:
    """run_job in fresh processes forked from this one (which must not have started CUDA), until each
    mode x pass agrees across them (lmstudy.measure.repeat). Compile time is the first process's: the
    later ones find the compiled graphs in the job's cache."""
    clock = clock or PhaseClock()
    keys = [(mode, pass_name) for mode in MODES for pass_name in spec.passes]
    mark_forking_parent()
    # Asked of a counting child: this process forks the measuring ones and never runs the user's code.
    why = model_facts(spec, count=False).not_applicable
    if why:  # an attention the model cannot switch to: a row that says so, nothing measured
        from lmstudy import environment

        return [{"size": spec.size, **spec.dims, "context_length": spec.context_length,
                 "batch_size": spec.batch_size, "precision": spec.precision, "attention": spec.attention,
                 "mode": mode, "pass": pass_name, "warmup_steps": spec.warmup_steps,
                 "timed_steps": spec.timed_steps, "status": "not applicable", "error": why,
                 **environment.host_facts()} for mode, pass_name in keys]

    def measure(pending, round_index):
        what = f"process {round_index + 1} of torch.compile's {spec.size} {spec.precision} job"
        rows = forked_with_phases(run_job, spec, clock=clock, what=what)
        print(f"process {round_index + 1}: " + ", ".join(
            f"{r['mode']} {r['pass']} {r['median_ms']:.3f} ms" if r["status"] == "ok" else
            f"{r['mode']} {r['pass']} {r['status']}" for r in rows), flush=True)
        return {(r["mode"], r["pass"]): r for r in rows}

    def samples(row):
        return json.loads(row["step_times_ms"]) if row.get("status") == "ok" else None

    by_key = measure_until_stable(measure, keys, samples, policy, progress=print, clock=clock)
    rows = []
    for key in keys:
        row = combine_processes(by_key[key])
        if row["status"] == "ok":
            row.update(rates.step_rates(row["median_ms"], tokens=spec.batch_size * spec.context_length,
                                        flops=row["flops_per_step"], peak_tflops=row.get("peak_tflops")))
        rows.append(row)
    return rows
