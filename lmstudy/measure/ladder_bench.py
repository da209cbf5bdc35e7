"""Benchmark: the training-step ladder of one size against the GPU's own matmul rate.

The target: the best rung reaches a given share of the dense bf16
matrix-multiply rate measured on the same GPU in the same run. Each rung
runs in a fresh process (an out-of-memory rung leaves nothing behind for the
next). Two forms share this code: the workflow's ladder section runs one
job per rung (scripts/ladder_rung.py: `measure_rung` in the job's own
process) and one for the matmul rate (scripts/matmul_reference.py:
`matmul_reference`); scripts/bench_ladder.py, by hand, runs every rung in a
child process and the matmul rate around them (`run_bench`).

The rungs are in lmstudy.ladder_rungs. A rung this device cannot run (CUDA
graphs on a CPU, ...) is a row with status "unsupported" and the reason
(lmstudy.measure.rung_support), as an out-of-memory one is a row with status "OOM".

With `profile_steps`, a rung also reports where its GPU time goes: kernel
time per step by category, read from a torch.profiler trace of those steps.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from lmstudy import environment, flops
from lmstudy.analyse import ladder_table
from lmstudy.analyse.nsys.categories import CATEGORIES, categorize
from lmstudy.analyse.nsys.torch_trace import read_events
from lmstudy.analyse.stats import summarize_ms
from lmstudy.ladder_rungs import RUNGS
from lmstudy.measure import gpu_clocks
from lmstudy.measure.devices import free_memory, open_device, out_of_memory_is_a_result, resolve_device
from lmstudy.measure.master_weights import MasterWeightAdamW
from lmstudy.measure.model import ModelConfig, make_optimizer
from lmstudy.measure.nsys.capture import torch_profiler_capture
from lmstudy.measure.rung_support import unsupported_here, unsupported_is_a_result
from lmstudy.measure.spec import model_dims
from lmstudy.measure.steps import Workload, build_workload, make_step, synchronize
from lmstudy.measure.timing import time_steps
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


@dataclasses.dataclass(frozen=True)
class BenchSpec:
    rung: str
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    context_length: int
    batch_size: int = 4
    vocab_size: int = 10000
    warmup_steps: int = 5
    timed_steps: int = 20
    profile_steps: int = 0  # > 0: also break the GPU time of this many steps down by kernel category
    device: str = "cuda"
    size: str = ""  # the size's name, recorded in the row
    tf32: bool = False
    memory_cap_gb: float | None = None

    @property
    def dims(self) -> dict[str, int]:
        return model_dims(self)


def matmul_tflops(n: int = 8192, repeats: int = 50, device: str = "cuda") -> dict:
    """Dense bf16 n x n x n matrix-multiply rate: median of `repeats`, CUDA events."""
    dev = torch.device(device)
    generator = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=generator)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=generator)
    out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(10):
        torch.matmul(a, b, out=out)
    synchronize(dev)
    times = []
    for _ in range(repeats):
        if dev.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b, out=out)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            torch.matmul(a, b, out=out)
            times.append(time.perf_counter() - t0)
    stats = summarize_ms(times)
    return {"n": n, "median_ms": stats["median_ms"], "tflops": 2 * n**3 / (stats["median_ms"] / 1e3) / 1e12}


def _nvidia_smi_id(device: torch.device) -> str:
    """The GPU a job measures on, as `nvidia-smi -i` names it: its lease's UUID, else CUDA's; "" off CUDA."""
    if device.type != "cuda":
        return ""
    leased = os.environ.get("LMSTUDY_GPU_UUID", "")
    if leased:
        return leased
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    return uuid if not uuid or uuid.startswith("GPU-") else f"GPU-{uuid}"


def matmul_reference(
    n: int, burst_repeats: int, sustained_repeats: int, device: str = "cuda",
    clock: PhaseClock | None = None,
) -> list[dict]:
    """The dense bf16 n^3 matmul rate of this device: a burst, then a sustained run; one row each.

    Each row also has the SM clock, its maximum and the power draw that
    nvidia-smi reads right after the run (empty where it cannot: a CPU), and
    the environment's columns. On a CPU it measures the CPU's rate.
    """
    clock = clock or PhaseClock()
    with clock.timing("start"):
        dev, env = open_device(device)
    gpu = _nvidia_smi_id(dev)
    rows = []
    for kind, repeats in (("burst", burst_repeats), ("sustained", sustained_repeats)):
        with clock.timing("measure"):
            rate = matmul_tflops(n, repeats=repeats, device=device)
            read = gpu_clocks.read(gpu) if dev.type == "cuda" else dict.fromkeys(gpu_clocks.COLUMNS)
        rows.append({"kind": kind, "repeats": repeats, **rate, **read, **env})
        free_memory(dev)
    return rows


TOP_KERNELS = 8


def kernel_breakdown(step, device: torch.device, steps: int) -> dict[str, float]:
    """GPU time per step by kernel category (CPU operators on a CPU), in ms.

    `gpu_busy_ms` is their sum; the step's median time less it is when the
    GPU waited for the host.
    """
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        with torch_profiler_capture(device, trace):
            for _ in range(steps):
                step()
            synchronize(device)
        activities = read_events(trace).activities
    ms = (activities["end"] - activities["start"]) / 1e6 / steps
    categories = [categorize(n, k) for n, k in zip(activities["name"], activities["kind"], strict=True)]
    per_category = ms.groupby(categories).sum()
    # Every category, 0 where none ran: each rung's row has the same columns.
    breakdown = {f"gpu_ms_{category}": float(per_category.get(category, 0.0)) for category in CATEGORIES}
    breakdown["gpu_busy_ms"] = float(ms.sum())
    top = ms.groupby(activities["name"].to_numpy()).sum().nlargest(TOP_KERNELS)
    breakdown["top_kernels"] = "; ".join(f"{name[:120]}: {value:.2f} ms" for name, value in top.items())
    return breakdown


def rung_workload(spec: BenchSpec, device: torch.device) -> Workload:
    """The model, optimizer and batch of `spec`'s rung, set up as the rung says."""
    rung = RUNGS[spec.rung]
    config = ModelConfig(context_length=spec.context_length, attention=rung.attention, **spec.dims)
    if rung.sdpa_backend:
        allow_only_sdpa_backend(rung.sdpa_backend)
    work = build_workload(config, spec.batch_size, rung.precision, device)
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


def measure_rung(spec: BenchSpec, clock: PhaseClock | None = None) -> dict:
    """One rung's training step, in this process: one row, status ok, OOM or unsupported.

    `clock` gets the phases: start (the device), build, compile (the first
    step's excess over the steady median), measure and profile.
    """
    clock = clock or PhaseClock()
    rung = RUNGS[spec.rung]
    with clock.timing("start"):
        device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    row = {
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
        "flops_per_step": flops.flops_per_step(
            "train_step", spec.batch_size, spec.context_length, **spec.dims
        ),
        **env,
    }
    reason = unsupported_here(rung, device.type)
    if reason:
        row.update(status="unsupported", reason=reason)
        return row
    with out_of_memory_is_a_result(device) as oom, unsupported_is_a_result() as unsupported:
        with clock.timing("build"):
            work = rung_workload(spec, device)
            step = make_step(work, "train_step")
            synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        row["first_step_s"] = time.perf_counter() - start
        started = time.perf_counter()
        times = time_steps(step, device, spec.warmup_steps, spec.timed_steps)
        measured = time.perf_counter() - started
        median_s = summarize_ms(times)["median_ms"] / 1e3
        # A rung that compiles traces and compiles in its first step: that step's excess is compile time.
        first_excess = max(0.0, row["first_step_s"] - median_s) if compiles(rung, device) else 0.0
        clock.add("compile", first_excess)
        clock.add("measure", measured + row["first_step_s"] - first_excess)
        with clock.timing("profile"):
            breakdown = kernel_breakdown(step, device, spec.profile_steps) if spec.profile_steps else {}
    for stopped in (oom, unsupported):
        if stopped:
            row.pop("first_step_s", None)
            row.update(stopped.fields())
            free_memory(device)
            return row
    row.update(status="ok", **summarize_ms(times), **breakdown)
    # Every timed step, as the timing rows keep them: a comparison of two runs tests the samples.
    row["step_times_ms"] = json.dumps([round(t * 1e3, 6) for t in times])
    row["achieved_tflops"] = row["flops_per_step"] / (row["median_ms"] / 1e3) / 1e12
    if device.type == "cuda":
        row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    return row


def _in_child(spec: BenchSpec, *extra: str):
    """What `python -m lmstudy.measure.ladder_bench SPEC [EXTRA]` prints last, as JSON.

    A fresh process per rung."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy.measure.ladder_bench", json.dumps(dataclasses.asdict(spec)), *extra],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"rung {spec.rung} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_rung_in_child(spec: BenchSpec) -> dict:
    return _in_child(spec)


def _quiet(_line: str) -> None:
    pass


def check_losses(base: BenchSpec, rungs: list[str], steps: int = 50, say=_quiet) -> list[dict]:
    """Each rung's `steps` losses against plain bf16's: within bf16's noise or not (fresh processes).

    `say` gets a line as each training run starts: they take minutes on a large model.
    """
    say(f"losses over {steps} steps: fp32 and bf16, the noise reference")
    fp32, bf16 = (
        _in_child(dataclasses.replace(base, rung=r), "losses", str(steps)) for r in ("fp32", "bf16")
    )
    rows = []
    for i, rung in enumerate(rungs, 1):
        say(f"losses over {steps} steps, rung {i}/{len(rungs)}: {RUNGS[rung].name}")
        losses = _in_child(dataclasses.replace(base, rung=rung), "losses", str(steps))
        ok, gap, noise = within_bf16_noise(losses, bf16, fp32)
        rows.append({"rung_key": rung, "rung": RUNGS[rung].name, "steps": steps, "first_loss": losses[0],
                     "last_loss": losses[-1], "max_gap_to_bf16": gap, "bf16_noise": noise,
                     "within_bf16_noise": ok})
    return rows


def run_bench(
    base: BenchSpec, rungs: list[str], matmul_n: int = 8192, sustained_repeats: int = 1000, say=_quiet
) -> tuple[list[dict], dict]:
    """Rows of every rung (fresh process each), and the matmul rates around them.

    `say` gets a line as each stage starts and ends (a rung of a large model
    can take minutes: whoever runs this by hand sees where it is).

    The matmul rate is measured three times: a short burst before the rungs,
    one after, and a sustained run after (`sustained_repeats` products, some
    seconds, as long as a rung's timed steps, so clocks settle as they do
    under a training step). The reference is the highest of the three
    (lmstudy.analyse.ladder_table): the target is never met against a rate the GPU
    showed it could beat.
    """
    import pandas as pd

    device = resolve_device(base.device, tf32=False)
    env = environment.describe(device)
    say(f"matmul reference: a burst of bf16 {matmul_n}^3 products")
    before = matmul_tflops(matmul_n, device=base.device)
    say(f"matmul reference: {before['tflops']:.1f} TFLOP/s")
    free_memory(device)
    rows = []
    for i, rung in enumerate(rungs, 1):
        say(f"rung {i}/{len(rungs)}: {RUNGS[rung].name} (a fresh process)")
        row = measure_rung_in_child(dataclasses.replace(base, rung=rung))
        rows.append(row)
        done = f"{row['median_ms']:.2f} ms per step" if row["status"] == "ok" else row["status"]
        say(f"rung {i}/{len(rungs)}: {RUNGS[rung].name}: {done}")
    say(f"matmul reference after the rungs: a burst, then {sustained_repeats} products sustained")
    after = matmul_tflops(matmul_n, device=base.device)
    sustained = matmul_tflops(matmul_n, repeats=sustained_repeats, device=base.device)
    matmul = pd.DataFrame(
        [{"kind": kind, **rate} for kind, rate in (("burst", before), ("burst_after", after),
                                                   ("sustained", sustained))]
    )
    joined = ladder_table.join(pd.DataFrame(rows), matmul)
    for row, share in zip(rows, joined["share_of_matmul"], strict=True):
        row["matmul_tflops"] = ladder_table.reference_tflops(matmul)
        row["share_of_matmul"] = None if pd.isna(share) else float(share)
    summary = {
        "matmul_before": before,
        "matmul_after": after,
        "matmul_sustained": sustained,
        "matmul_tflops": ladder_table.reference_tflops(matmul),
        **env,
    }
    ok = [r for r in rows if r["status"] == "ok"]
    if ok:
        best = max(ok, key=lambda r: r["achieved_tflops"])
        summary.update(
            best_rung=best["rung"],
            best_tflops=best["achieved_tflops"],
            best_share=best["share_of_matmul"],
        )
    return rows, summary


if __name__ == "__main__":
    spec = BenchSpec(**json.loads(sys.argv[1]))
    if sys.argv[2:3] == ["losses"]:
        print(json.dumps(training_losses(spec, int(sys.argv[3]))))
    else:
        print(json.dumps(measure_rung(spec), default=str))
