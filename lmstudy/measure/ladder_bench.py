"""Benchmark: the training-step ladder of one size against the GPU's own matmul ceiling.

The target: the best rung reaches a given share of the dense bf16
matrix-multiply ceiling measured on the same GPU in the same run
(lmstudy.measure.matmul_ceiling). Each rung runs in a fresh process (an
out-of-memory rung leaves nothing behind for the next). Two forms share this
code: the workflow's ladder section runs one job per rung
(lmstudy measure ladder: `measure_rung`, then the ceiling of the job's own
GPU, each in fresh processes); scripts/bench_ladder.py, by hand, runs every
rung in a fresh process and measures the ceiling before and after them
(`run_bench`). Both fork their fresh processes the one way
(lmstudy.measure.fresh_process): the process that forks never touches CUDA.

The rungs are in lmstudy.ladder_rungs. A rung this device cannot run (CUDA
graphs on a CPU, ...) is a row with status "unsupported" and the reason
(lmstudy.measure.rung_support), as an out-of-memory one is a row with status "OOM".

With `profile_steps`, a rung also reports where its GPU time goes: kernel
time per step by category, read from a torch.profiler trace of those steps.
"""

from __future__ import annotations

import dataclasses
import json

import torch

from lmstudy import environment, rates
from lmstudy.analyse import ladder_table
from lmstudy.analyse.stats import summarize_ms
from lmstudy.ladder_rungs import RUNGS, Rung
from lmstudy.measure.device_clock import now, phase
from lmstudy.measure.devices import free_memory, open_device, out_of_memory_is_a_result, resolve_device
from lmstudy.measure.factory import NotApplicable, build_model, import_model_code
from lmstudy.measure.fresh_process import mark_forking_parent, run_forked
from lmstudy.measure.gpu_time import gpu_measures, kernel_breakdown
from lmstudy.measure.master_weights import MasterWeightAdamW
from lmstudy.measure.matmul_ceiling import measure_ceiling, summarize
from lmstudy.measure.model import ModelConfig, make_optimizer
from lmstudy.measure.repeat import NoisePolicy, combine_processes, forked_with_phases, measure_until_stable
from lmstudy.measure.rung_support import unsupported_here, unsupported_is_a_result
from lmstudy.measure.spec import ModelSpec
from lmstudy.measure.steps import Workload, autocast_context, build_workload, make_step
from lmstudy.measure.timing import time_steps
from lmstudy.model_choice import ModelChoice
from lmstudy.phases import PhaseClock

SDPA_BACKENDS = {
    "flash": torch.backends.cuda.enable_flash_sdp,
    "efficient": torch.backends.cuda.enable_mem_efficient_sdp,
    "cudnn": torch.backends.cuda.enable_cudnn_sdp,
    "math": torch.backends.cuda.enable_math_sdp,
}


def allow_only_sdpa_backend(backend: str) -> None:
    """Make `backend` the only one SDPA may use, in this process: no silent fallback to another."""
    for name, enable in SDPA_BACKENDS.items():
        enable(name == backend)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchSpec(ModelSpec):
    """One rung of the ladder on the study's model: ModelSpec's fields, less the precision, which
    the rung sets (it is not given: a spec names the rung, and the rung its precision)."""

    rung: str
    # No defaults: config.yaml's ladder:, through the job's spec (lmstudy.job_spec).
    precision: str = dataclasses.field(init=False)
    warmup_steps: int
    timed_steps: int
    profile_steps: int  # > 0: also break the GPU time of this many steps down by kernel category

    def __post_init__(self):
        # Read back from JSON (a child process's argument), the choice is a dict.
        object.__setattr__(self, "model", ModelChoice.coerce(self.model))
        object.__setattr__(self, "precision", RUNGS[self.rung].precision)

    @property
    def model_attention(self) -> str:
        return RUNGS[self.rung].attention

    def flops_per_step(self, pass_name: str = "train_step") -> float | None:
        """A training step's FLOPs (ModelSpec's count); None for a model too large to count on the host
        (it reads a value in its forward, so not on the meta device), which is too large to measure
        too: its row says OOM."""
        from lmstudy.measure.devices import is_out_of_memory
        from lmstudy.measure.factory import CountOnDevice

        try:
            return super().flops_per_step(pass_name)
        except CountOnDevice:  # counted on the device after the rung's measurement (measure_rung)
            return None
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            return None


def rung_workload(spec: BenchSpec, device: torch.device) -> Workload:
    """The model, optimizer and batch of `spec`'s rung, set up as the rung says."""
    rung = RUNGS[spec.rung]
    config = ModelConfig(context_length=spec.context_length, attention=rung.attention, **spec.dims)
    if rung.sdpa_backend:
        allow_only_sdpa_backend(rung.sdpa_backend)
    work = build_workload(config, spec.batch_size, rung.precision, device, choice=spec.model)
    if rung.fused_adamw:
        work.optimizer = make_optimizer(work.model, fused=True)
    if rung.master_weights:
        # Before compiling: it replaces the Linear weights the compiled model reads.
        work.optimizer = MasterWeightAdamW(work.model, compiled=device.type == "cuda")
    if rung.compile_optimizer:
        # make_step calls optimizer.step(); the compiled one shadows the method.
        work.optimizer.step = torch.compile(work.optimizer.step)
    if rung.compile_mode:
        work.model = torch.compile(work.model, mode=rung.compile_mode)
    return work


def rung_workload_check(spec: BenchSpec) -> None:
    """NotApplicable where the model does not allow the rung (its attention or its Linear weights),
    found on the meta device before anything is built on the real one."""
    rung = RUNGS[spec.rung]
    if spec.model.builtin:
        return
    with torch.device("meta"):
        model = build_model(spec.model, spec.dims, spec.context_length, rung.attention)
    if rung.master_weights and not any(isinstance(m, torch.nn.Linear) for m in model.modules()):
        raise NotApplicable("bf16 weights with fp32 masters replace nn.Linear weights, "
                            "and the model has none.")


def training_losses(spec: BenchSpec, steps: int = 50) -> list[float]:
    """The loss of each of `steps` training steps of `spec`'s rung from the study's seed.

    The same model, batch and seed for every rung: a rung that changes how a
    step is computed, not what, follows the plain bf16 rung's trajectory
    within bf16's own noise (tests/test_ladder.py, scripts/bench_ladder.py --check-loss).
    """
    device = resolve_device(spec.device, tf32=False)
    step = make_step(rung_workload(spec, device), "train_step")
    return [step().item() for _ in range(steps)]


def within_bf16_noise(rung: list[float], bf16: list[float], fp32: list[float]) -> tuple[bool, float, float]:
    """Whether a rung's losses stay within bf16's noise of plain bf16's, step by step.

    The noise is bf16 autocast's own largest departure from fp32 over the
    same steps. Two roundings of that size can differ by up to twice it, so a
    rung that computes the same step in another order (SDPA's fused kernel,
    compiled fusions) is within it when its largest gap to bf16 is at most
    twice that; (ok, the rung's largest gap, the noise).
    """
    gap = max(abs(a - b) for a, b in zip(rung, bf16, strict=True))
    noise = max(abs(a - b) for a, b in zip(bf16, fp32, strict=True))
    return gap <= 2 * noise, gap, noise


def compiles(rung, device: torch.device) -> bool:
    """Whether the rung's first step runs torch.compile (the model, its AdamW, or the masters' update)."""
    masters_compiled = rung.master_weights and device.type == "cuda"  # MasterWeightAdamW(compiled=...)
    return bool(rung.compile_mode or rung.compile_optimizer or masters_compiled)


def _rung_description(spec: BenchSpec, rung: Rung, flops: float | None, env: dict) -> dict:
    """The row's fields that say what was measured (the rung, the model's size, the steps) and where
    (`env`, the device's): every row has them, whatever its status."""
    return {
        "size": spec.size,
        "rung_key": spec.rung,
        "rung": rung.name,
        **spec.dims,
        "context_length": spec.context_length,
        "batch_size": spec.batch_size,
        "precision": rung.precision,
        "attention": rung.attention,
        "compile_mode": rung.compile_mode or "",
        "fused_adamw": rung.fused_adamw,
        "sdpa_backend": rung.sdpa_backend or "",
        "compile_optimizer": rung.compile_optimizer,
        "master_weights": rung.master_weights,
        "warmup_steps": spec.warmup_steps,
        "timed_steps": spec.timed_steps,
        "profile_steps": spec.profile_steps,
        "flops_per_step": flops,
        **env,
    }


def _time_rung_steps(step, spec: BenchSpec, rung: Rung, device: torch.device, clock: PhaseClock,
                     row: dict) -> list[float]:
    """The timed steps of a built rung, after its first step (timed alone, into `row["first_step_s"]`).

    A rung that compiles traces and compiles in its first step, so that
    step's excess over the steady median goes to the clock's "compile"
    phase; the rest of the first step and the timed steps go to "measure".
    """
    start = now(device)
    step()
    row["first_step_s"] = now(device) - start
    started = now(device)
    times = time_steps(step, device, spec.warmup_steps, spec.timed_steps)
    measured = now(device) - started
    median_s = summarize_ms(times)["median_ms"] / 1e3
    # A rung that compiles traces and compiles in its first step: that step's excess is compile time.
    first_excess = max(0.0, row["first_step_s"] - median_s) if compiles(rung, device) else 0.0
    clock.add("compile", first_excess)
    clock.add("measure", measured + row["first_step_s"] - first_excess)
    return times


def _count_flops_on_device(spec: BenchSpec, work: Workload, device: torch.device, clock: PhaseClock,
                           row: dict) -> None:
    """Fill `row["flops_per_step"]` by counting the built model on the device: for a user's model the
    meta device could not count (it reads a value in its forward)."""
    # Under the rung's own autocast: a rung whose weights are bf16 (with fp32 masters) runs its
    # forward so, and a forward outside it mixes dtypes; the count of FLOPs is the same.
    with phase(clock, "count", device), autocast_context(work.precision, device):
        counted = spec.count_on_device(work.model)
    train_step = (counted or {}).get("train_step")
    row["flops_per_step"] = float(train_step) if train_step else None


def _record_measured_rung(row: dict, times: list[float], breakdown: dict, device: torch.device) -> None:
    """Fill in a rung that ran: status ok, its step times' summary and samples, its kernel breakdown,
    its achieved TFLOP/s and (on CUDA) its peak allocated memory."""
    row.update(status="ok", **summarize_ms(times), **breakdown)
    # Every timed step, as the timing rows keep them: a comparison of two runs tests the samples.
    row["step_times_ms"] = json.dumps([round(t * 1e3, 6) for t in times])
    row["achieved_tflops"] = rates.achieved_tflops(row["flops_per_step"], ms=row["median_ms"])
    if device.type == "cuda":
        row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)


def measure_rung(spec: BenchSpec, clock: PhaseClock | None = None) -> dict:
    """One rung's training step, in this process: one row, status ok, OOM or unsupported.

    `clock` gets the phases: start (the device), build, compile (the first
    step's excess over the steady median), measure and profile.
    """
    clock = clock or PhaseClock()
    rung = RUNGS[spec.rung]
    with clock.timing("start"):
        device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    with phase(clock, "model_imports", device):
        import_model_code(spec.model, spec.dims, spec.context_length)
    with phase(clock, "count", device):
        flops = spec.flops_per_step()
    row = _rung_description(spec, rung, flops, env)
    reason = unsupported_here(rung, device.type)
    if reason:
        row.update(status="unsupported", reason=reason)
        return row
    try:
        with phase(clock, "build", device):
            rung_workload_check(spec)
    except NotApplicable as why:
        row.update(status="not applicable", reason=f"{spec.model.label}: {why}")
        return row
    with out_of_memory_is_a_result(device) as oom, unsupported_is_a_result() as unsupported:
        # Built here, not in a helper: the workload and its step stay referenced until this function
        # returns (an out-of-memory rung's too, until after free_memory below).
        with phase(clock, "build", device):
            work = rung_workload(spec, device)
            step = make_step(work, "train_step")
        times = _time_rung_steps(step, spec, rung, device, clock, row)
        with phase(clock, "profile", device):
            # Every process records the GPU's busy time and kernels of a step; the first, by category.
            breakdown = (kernel_breakdown(step, device, spec.profile_steps) if spec.profile_steps
                         else gpu_measures(step, device))
        if row["flops_per_step"] is None and not spec.model.builtin:  # the meta device could not count
            _count_flops_on_device(spec, work, device, clock, row)
    for stopped in (oom, unsupported):
        if stopped:
            row.pop("first_step_s", None)
            row.update(stopped.fields())
            free_memory(device)
            return row
    _record_measured_rung(row, times, breakdown, device)
    return row


def measure_rung_in_processes(spec: BenchSpec, policy: NoisePolicy, clock: PhaseClock | None = None) -> dict:
    """One rung's row from fresh processes forked from this one (which must not have started CUDA).

    At least `policy.min_processes`, more while their medians disagree
    (lmstudy.measure.repeat); only the first profiles its kernels. The row
    is the first process's, with the median over processes, its interval,
    the number of processes and their spread, and every process's steps.
    """
    clock = clock or PhaseClock()

    def measure(keys, round_index):
        child = spec if round_index == 0 else dataclasses.replace(spec, profile_steps=0)
        what = f"process {round_index + 1} of rung {spec.rung} of {spec.size}"
        row = forked_with_phases(measure_rung, child, clock=clock, what=what)
        print(f"{spec.size} {spec.rung}, process {round_index + 1}: {row['status']}"
              + (f", median {row['median_ms']:.3f} ms" if row["status"] == "ok" else ""), flush=True)
        return {spec.rung: row}

    def samples(row):
        return json.loads(row["step_times_ms"]) if row.get("status") == "ok" else None

    rows = measure_until_stable(measure, [spec.rung], samples, policy, progress=print, clock=clock)[spec.rung]
    row = combine_processes(rows)
    if row["status"] != "ok":
        return row
    row["achieved_tflops"] = rates.achieved_tflops(row["flops_per_step"], ms=row["median_ms"])
    return row


@dataclasses.dataclass(frozen=True)
class CeilingSpec:
    """How the matmul ceiling is measured (config.yaml ladder.matmul; lmstudy.measure.matmul_ceiling)."""

    sizes: tuple[int, ...]
    warmup_s: float
    bursts: int
    burst_products: int


def _ceiling_bursts(spec: BenchSpec, ceiling: CeilingSpec, clock) -> list[dict]:
    device, _ = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    with phase(clock, "measure", device):
        return measure_ceiling(
            list(ceiling.sizes), ceiling.warmup_s, ceiling.bursts, ceiling.burst_products, device
        )


def measure_rung_and_ceiling(
    spec: BenchSpec, ceiling: CeilingSpec, policy: NoisePolicy, clock: PhaseClock | None = None
) -> tuple[dict, list[dict]]:
    """The rung's row (fresh processes until they agree), then the matmul ceiling of the same GPU in one
    more fresh process (its burst rows).

    The ceiling comes after the rung: the rung's timing is never disturbed
    by it, and the GPU is the one the rung ran on (the job's lease). Its
    rows carry the rung's job key and environment (which GPU), so each rung
    is joined with its own GPU's ceiling.
    """
    clock = clock or PhaseClock()
    row = measure_rung_in_processes(spec, policy, clock)
    bursts = forked_with_phases(_ceiling_bursts, spec, ceiling, clock=clock,
                                what=f"the matmul ceiling after rung {spec.rung}")
    env = {k: row[k] for k in environment.ENVIRONMENT_COLUMNS if k in row}
    return row, [{"size": spec.size, "rung_key": spec.rung, **burst, **env} for burst in bursts]


def _losses(spec: BenchSpec, steps: int) -> dict:
    return {"losses": training_losses(spec, steps)}


def _losses_in_child(spec: BenchSpec, steps: int) -> list[float]:
    """training_losses in a fresh process (lmstudy.measure.fresh_process): each rung starts clean."""
    return run_forked(_losses, spec, steps, what=f"the loss run of rung {spec.rung}",
                      with_fork_time=False)["losses"]


def measure_rung_in_child(spec: BenchSpec) -> dict:
    """measure_rung in a fresh process (lmstudy.measure.fresh_process)."""
    return run_forked(measure_rung, spec, what=f"rung {spec.rung} of {spec.size}")


def _ceiling_in_child(spec: BenchSpec, ceiling: CeilingSpec) -> list[dict]:
    return forked_with_phases(_ceiling_bursts, spec, ceiling, clock=PhaseClock(),
                              what="the matmul ceiling")


def _quiet(_line: str) -> None:
    pass


def check_losses(base: BenchSpec, rungs: list[str], steps: int = 50, say=_quiet) -> list[dict]:
    """Each rung's `steps` losses against plain bf16's: within bf16's noise or not (fresh processes).

    `say` gets a line as each training run starts: they take minutes on a large model.
    """
    mark_forking_parent()
    say(f"losses over {steps} steps: fp32 and bf16, the noise reference")
    fp32, bf16 = (_losses_in_child(dataclasses.replace(base, rung=r), steps) for r in ("fp32", "bf16"))
    rows = []
    for i, rung in enumerate(rungs, 1):
        say(f"losses over {steps} steps, rung {i}/{len(rungs)}: {RUNGS[rung].name}")
        losses = _losses_in_child(dataclasses.replace(base, rung=rung), steps)
        ok, gap, noise = within_bf16_noise(losses, bf16, fp32)
        rows.append({"rung_key": rung, "rung": RUNGS[rung].name, "steps": steps, "first_loss": losses[0],
                     "last_loss": losses[-1], "max_gap_to_bf16": gap, "bf16_noise": noise,
                     "within_bf16_noise": ok})
    return rows


def run_bench(
    base: BenchSpec, rungs: list[str], matmul_sizes: tuple[int, ...] = (8192,), warmup_s: float = 1.5,
    bursts: int = 10, burst_products: int = 20, say=_quiet,
) -> tuple[list[dict], dict]:
    """Rows of every rung (fresh process each), and the matmul ceiling measured before and after them.

    The reference is the highest burst of both (lmstudy.analyse.ladder_table):
    the target is never met against a rate the GPU showed it could beat.

    `say` gets a line as each stage starts and ends (a rung of a large model
    can take minutes: whoever runs this by hand sees where it is).
    """
    import pandas as pd

    # Every GPU step in fresh processes, the ceilings too: this process forks them and leaves CUDA alone.
    mark_forking_parent()
    ceiling = CeilingSpec(tuple(matmul_sizes), warmup_s, bursts, burst_products)
    say(f"matmul ceiling before the rungs: bursts of bf16 {', '.join(map(str, matmul_sizes))}^3 products")
    before = _ceiling_in_child(base, ceiling)
    rows = []
    for i, rung in enumerate(rungs, 1):
        say(f"rung {i}/{len(rungs)}: {RUNGS[rung].name} (a fresh process)")
        row = measure_rung_in_child(dataclasses.replace(base, rung=rung))
        rows.append(row)
        done = f"{row['median_ms']:.2f} ms per step" if row["status"] == "ok" else row["status"]
        say(f"rung {i}/{len(rungs)}: {RUNGS[rung].name}: {done}")
    say("matmul ceiling after the rungs")
    after = _ceiling_in_child(base, ceiling)
    env = {k: rows[0][k] for k in environment.ENVIRONMENT_COLUMNS if rows and k in rows[0]}
    matmul = pd.DataFrame([{"when": "before", **r} for r in before] + [{"when": "after", **r} for r in after])
    joined = ladder_table.join(pd.DataFrame(rows), matmul)
    for row, share in zip(rows, joined["share_of_matmul"], strict=True):
        row["matmul_tflops"] = ladder_table.reference_tflops(matmul)
        row["share_of_matmul"] = None if pd.isna(share) else float(share)
    summary = {
        "matmul_before": summarize(before),
        "matmul_after": summarize(after),
        "matmul_tflops": ladder_table.reference_tflops(matmul),
        **env,
    }
    ok = [r for r in rows if r["status"] == "ok"]
    if ok:
        best = max(ok, key=lambda r: r["achieved_tflops"] or 0.0)
        summary.update(
            best_rung=best["rung"],
            best_tflops=best["achieved_tflops"],
            best_share=best["share_of_matmul"],
        )
    return rows, summary

