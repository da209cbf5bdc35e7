"""End-to-end timing of one model configuration (section 1).

A job measures one (size, context length, precision, variant) for every
pass and warm-up count. Warm-up 0 is the cold start, so it is measured in a
fresh process of its own for each pass; warm-ups above 0 reuse one process
and one model, which keeps process start-up a small share of the study.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from lmstudy import environment, flops, hardware
from lmstudy.devices import apply_memory_cap, free_memory, is_out_of_memory, resolve_device
from lmstudy.spec import ModelSpec
from lmstudy.stats import summarize_ms
from lmstudy.steps import PASSES, make_step, synchronize

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


def time_steps(step: Callable[[], None], device: torch.device, warmup: int, steps: int) -> list[float]:
    """Seconds per step: `warmup` untimed steps, then `steps` timed ones.

    The device is synchronized before the clock starts and after every step,
    so each time covers the step's GPU work and nothing else.
    """
    for _ in range(warmup):
        step()
    synchronize(device)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def _base_row(spec: TimingSpec, pass_name: str, warmup: int) -> dict:
    row = {
        "size": spec.size, **spec.dims, "context_length": spec.context_length,
        "batch_size": spec.batch_size, "pass": pass_name, "precision": spec.precision,
        "variant": spec.variant, "warmup_steps": warmup, "timed_steps": spec.timed_steps,
        "process": "fresh" if warmup == 0 else "shared",
    }
    row["params"] = spec.parameter_count()
    row["flops_per_step"] = flops.flops_per_step(
        pass_name, spec.batch_size, spec.context_length, **spec.dims
    )
    return row


def _measured_row(row: dict, times: list[float], spec: TimingSpec, device: torch.device) -> dict:
    row.update(status="ok", **summarize_ms(times))
    row["step_times_ms"] = json.dumps([round(t * 1e3, 4) for t in times])
    row["tokens_per_s"] = spec.batch_size * spec.context_length / (row["median_ms"] / 1e3)
    row["achieved_tflops"] = row["flops_per_step"] / (row["median_ms"] / 1e3) / 1e12
    on_gpu = device.type == "cuda"
    # The CPU has no caching allocator to ask; its peak stays empty.
    row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device) if on_gpu else None
    row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device) if on_gpu else None
    return row


def _finish(row: dict, device: torch.device, spec: TimingSpec, env: dict) -> dict:
    gpu = env["gpu"]
    peak = hardware.peak_tflops(gpu, spec.precision, spec.tf32) if device.type == "cuda" else None
    row["peak_tflops"] = peak
    ok = row.get("status") == "ok"
    row["mfu"] = row["achieved_tflops"] / peak if peak and ok else None
    row.update(env)
    return row


def _build(spec: TimingSpec, device: torch.device):
    work = spec.build_workload(device)
    if spec.compiled:
        work.model = torch.compile(work.model)
    return work


def measure_in_process(spec: TimingSpec, plan: list[tuple[str, int]]) -> list[dict]:
    """Rows for each (pass, warm-up) of `plan`, in order, sharing one model build.

    A warm-up of 0 is a cold start only as the first entry of a fresh process.
    """
    device = resolve_device(spec.device, spec.tf32)
    apply_memory_cap(device, spec.memory_cap_gb)
    env = environment.describe(device)
    rows = []
    work, build_error = None, None
    build_start = time.perf_counter()
    try:
        work = _build(spec, device)
        synchronize(device)
    except Exception as error:  # noqa: BLE001 - OOM is a result, the rest re-raised
        if not is_out_of_memory(error):
            raise
        build_error = error
        free_memory(device)
    build_s = time.perf_counter() - build_start
    for pass_name, warmup in plan:
        row = _base_row(spec, pass_name, warmup)
        row["build_s"] = build_s
        if build_error is not None:
            row.update(status="OOM", error=str(build_error).splitlines()[0][:300])
            if warmup == 0:
                row["process_s"] = seconds_since_process_start()
            rows.append(_finish(row, device, spec, env))
            continue
        start = time.perf_counter()
        try:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            step = make_step(work, pass_name)
            times = time_steps(step, device, warmup, spec.timed_steps)
            _measured_row(row, times, spec, device)
        except Exception as error:  # noqa: BLE001
            if not is_out_of_memory(error):
                raise
            row.update(status="OOM", error=str(error).splitlines()[0][:300])
            step = None
            work.model.zero_grad(set_to_none=True)
            if work.optimizer is not None:
                work.optimizer.state.clear()
            free_memory(device)
        row["measure_s"] = time.perf_counter() - start
        if warmup == 0:
            row["process_s"] = seconds_since_process_start()
        rows.append(_finish(row, device, spec, env))
    return rows


def measure_cold(spec: TimingSpec, pass_name: str) -> dict:
    """Warm-up 0 for one pass, in a fresh Python process.

    The child reports its row as JSON on the last line of its stdout; its
    whole wall time, interpreter start and imports included, is `process_s`.
    """
    payload = json.dumps({**dataclasses.asdict(spec), "passes": [pass_name]})
    # The child imports this package from wherever this process found it.
    package_root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p
    )}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy.timing", payload],
        capture_output=True, text=True, env=env,
    )
    process_s = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(
            f"the cold-start measurement of {spec.size} ctx {spec.context_length} "
            f"{spec.precision} {pass_name} failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
        )
    sys.stderr.write(done.stderr)
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["process_s"] = process_s
    return row


def run_job(spec: TimingSpec) -> list[dict]:
    """All rows of one job.

    Each pass's cold start needs a fresh process. The first pass's is this
    process's own first measurement; the others run in child processes
    first, while this process has not touched the GPU, so that each child
    has the device to itself. Then this process measures every pass at the
    warm-ups above 0 on one model build.
    """
    job_start = time.perf_counter()
    rows, plan = [], []
    if 0 in spec.warmup_steps:
        rows += [measure_cold(spec, p) for p in spec.passes[1:]]
        plan.append((spec.passes[0], 0))
    plan += [(p, w) for p in spec.passes for w in sorted(spec.warmup_steps) if w > 0]
    if plan:
        own = measure_in_process(spec, plan)
        if plan[0][1] == 0:  # this process's share before its cold start ended
            own[0]["process_s"] -= sum(r["process_s"] for r in rows)
        rows += own
    # The job's whole process, interpreter start and imports included.
    job_s = seconds_since_process_start()
    if job_s != job_s:
        job_s = time.perf_counter() - job_start
    for row in rows:
        row["job_s"] = job_s
    return rows


def seconds_since_process_start() -> float:
    """Wall time since this process started (Linux), NaN where unknown."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            return float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def spec_from_json(payload: str) -> TimingSpec:
    data = json.loads(payload)
    for key in ("passes", "warmup_steps"):
        data[key] = tuple(data[key])
    return TimingSpec(**data)


def _cold_main(payload: str) -> None:
    spec = spec_from_json(payload)
    (row,) = measure_in_process(spec, [(spec.passes[0], 0)])
    print(json.dumps(row, default=str))


if __name__ == "__main__":
    _cold_main(sys.argv[1])
