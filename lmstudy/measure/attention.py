"""Attention alone (section 5): a sweep of head size x sequence length.

One head, causal, inputs of shape (batch, 1, seq, d). Each configuration
times `steps` forwards and `steps` backwards after warm-up, and records the
memory in use before the backward. Three implementations:

- ``naive``: softmax(q k^T / sqrt(d)) v in eager PyTorch, the model's math;
- ``naive-compile``: the same function under ``torch.compile``;
- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention``, whose
  backend (flash, memory-efficient, math, cuDNN) is read off the operator
  it dispatched to and recorded.

Out-of-memory in a configuration is a result row, never a crash. The memory
accounting of the naive implementation, from shapes and dtypes alone, is
lmstudy.analyse.attention_memory's (the report reads it without torch).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from lmstudy import rates
from lmstudy.analyse.attention_memory import BYTES, attention_flops, naive_memory_accounting, predicted_bytes  # noqa: F401
from lmstudy.analyse.stats import summarize_ms
from lmstudy.measure.device_clock import now, synchronize
from lmstudy.measure.devices import free_memory, open_device, out_of_memory_is_a_result
from lmstudy.measure.gpu_time import gpu_measures
from lmstudy.measure.repeat import NoisePolicy, combine_processes, forked_with_phases, measure_until_stable
from lmstudy.phases import PhaseClock

IMPLEMENTATIONS = ("naive", "naive-compile", "sdpa")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax(q k^T / sqrt(d)) v, step by step: lmstudy.measure.model's math.

    The model's function marks its steps with NVTX ranges, which torch.compile
    cannot trace through (every range is a graph break); this one carries no
    markers, so eager and compiled run exactly the same operations.
    """
    seq = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return probs @ v


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention_function(implementation: str) -> Callable:
    """The callable that `implementation` names; a compiled one starts fresh."""
    if implementation == "naive":
        return naive_attention
    if implementation == "sdpa":
        return sdpa_attention
    if implementation == "naive-compile":
        # A fresh compile per configuration: no cache of earlier shapes, static
        # shapes (no dynamic-shape kernels), and the first call pays the compile.
        torch._dynamo.reset()
        return torch.compile(naive_attention, dynamic=False, fullgraph=True)
    raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, not {implementation!r}")


# Operators scaled_dot_product_attention dispatches to, by backend. The CPU
# has its own flash kernel (`_scaled_dot_product_flash_attention_for_cpu`).
_SDPA_BACKENDS = (
    ("_scaled_dot_product_flash_attention", "flash"),
    ("_scaled_dot_product_efficient_attention", "memory-efficient"),
    ("_scaled_dot_product_cudnn_attention", "cuDNN"),
    ("_scaled_dot_product_attention_math", "math"),
    ("_scaled_dot_product_fused_attention_overrideable", "overrideable"),
)


def sdpa_backend_of(op_names) -> str:
    """The SDPA backend that a set of profiled operator names shows."""
    found = []
    for op in op_names:
        for marker, backend in _SDPA_BACKENDS:
            if marker in op and backend not in found:
                found.append(backend)
    return "+".join(found) if found else "unknown"


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """Run SDPA once under the profiler (CPU events only) and name its backend."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        sdpa_attention(q, k, v)
    return sdpa_backend_of({event.name for event in prof.events()})


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    implementation: str
    precision: str
    head_dim: int
    seq_lens: tuple[int, ...]
    # No defaults but the seed's (no setting of the study): config.yaml's attention:, through the
    # job's spec (lmstudy.job_spec).
    batch_size: int
    steps: int
    warmup: int
    device: str
    tf32: bool
    memory_cap_gb: float | None
    seed: int = 0

    def __post_init__(self):
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, not {self.implementation!r}")
        if self.precision not in DTYPES:
            raise ValueError(f"precision must be one of {tuple(DTYPES)}, not {self.precision!r}")


def _memory(device: torch.device, what: str) -> int | None:
    if device.type != "cuda":
        return None  # the CPU has no caching allocator to ask
    return getattr(torch.cuda, what)(device)


def _timed(fn: Callable[[], object], device: torch.device) -> float:
    start = now(device)
    fn()
    return now(device) - start


def _random_inputs(spec: SweepSpec, seq: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """q, k, v (which need their gradients) and the backward's output gradient of one configuration:
    random, in the spec's dtype, from the spec's seed, in that order."""
    dtype = DTYPES[spec.precision]
    shape = (spec.batch_size, 1, seq, spec.head_dim)
    generator = torch.Generator(device=device).manual_seed(spec.seed)
    q, k, v, grad_out = (
        torch.randn(shape, device=device, dtype=dtype, generator=generator) for _ in range(4)
    )
    for t in (q, k, v):
        t.requires_grad_(True)
    return q, k, v, grad_out


def _time_backwards_and_memory(fn: Callable, qkv: tuple[torch.Tensor, ...], grad_out: torch.Tensor,
                               clear_grads: Callable[[], None], steps: int, device: torch.device,
                               row: dict) -> list[float]:
    """The times of `steps` backwards, each after an untimed forward; the memory into `row`.

    The peak is reset first, so the first step's forward shows the inputs'
    memory, the memory in use before the backward and the forward's peak;
    after the last step, the peak of them all. Each output is freed before
    the next forward, as the caller's gradients are cleared.
    """
    backward_times = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    before_forward = _memory(device, "memory_allocated")
    for i in range(steps):
        out = fn(*qkv)
        synchronize(device)  # not a timer: the forward's memory is all allocated before it is read
        if i == 0:
            row["memory_before_backward_bytes"] = _memory(device, "memory_allocated")
            row["peak_forward_bytes"] = _memory(device, "max_memory_allocated")
            row["inputs_bytes"] = before_forward
        backward_times.append(_timed(lambda out=out: out.backward(grad_out), device))
        del out
        clear_grads()
    row["peak_bytes"] = _memory(device, "max_memory_allocated")
    return backward_times


def _add_step_time_columns(row: dict, forward_times: list[float], backward_times: list[float]) -> None:
    """Each pass's step statistics (forward_median_ms, ...) and its every step time, in milliseconds."""
    for name, times in (("forward", forward_times), ("backward", backward_times)):
        for key, value in summarize_ms(times).items():
            row[f"{name}_{key}"] = value
        # Every step, so that rows of several processes combine (lmstudy.measure.repeat).
        row[f"{name}_times_ms"] = json.dumps([round(t * 1e3, 6) for t in times])


def measure_config(spec: SweepSpec, seq: int, device: torch.device) -> dict:
    """Time one (seq, d) configuration; raises on OOM (the caller records it)."""
    q, k, v, grad_out = _random_inputs(spec, seq, device)
    fn = attention_function(spec.implementation)
    row: dict = {}

    def clear_grads():
        q.grad = k.grad = v.grad = None

    def forward_backward():
        fn(q, k, v).backward(grad_out)
        clear_grads()

    # The first call compiles (naive-compile); its excess over the steady
    # state is the compile time, shown apart.
    row["first_call_ms"] = _timed(forward_backward, device) * 1e3
    for _ in range(spec.warmup):
        forward_backward()

    forward_times = []
    for _ in range(spec.steps):
        forward_times.append(_timed(lambda: fn(q, k, v), device))

    backward_times = _time_backwards_and_memory(fn, (q, k, v), grad_out, clear_grads, spec.steps, device, row)
    _add_step_time_columns(row, forward_times, backward_times)
    # One more forward, profiled: its GPU time and kernels (the host's wait is not in them).
    forward = gpu_measures(lambda: fn(q, k, v), device)
    both = gpu_measures(forward_backward, device)
    row.update({f"forward_{name}": value for name, value in forward.items()})
    # The backward's: a forward and backward profiled together, less the forward's.
    row.update({f"backward_{name}": both[name] - forward[name] if both[name] is not None else None
                for name in forward})
    if spec.implementation == "sdpa":
        row["sdpa_backend"] = sdpa_backend(q, k, v)
    flops = attention_flops(spec.batch_size, seq, spec.head_dim)
    row["forward_tflops"] = rates.achieved_tflops(flops, ms=row["forward_median_ms"])
    row["backward_tflops"] = rates.achieved_tflops(2 * flops, ms=row["backward_median_ms"])
    return row


def _total_memory(spec: SweepSpec, device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    total = torch.cuda.get_device_properties(device).total_memory
    if spec.memory_cap_gb:
        return min(total, int(spec.memory_cap_gb * 2**30))
    return total


def run_sweep(spec: SweepSpec, clock: PhaseClock | None = None) -> list[dict]:
    """One row per sequence length, ascending; OOM rows carry the error.

    `clock` gets the phases: start, compile (naive-compile's first calls'
    excess over the steady state) and measure.
    """
    clock = clock or PhaseClock()
    with clock.timing("start"):
        device, env = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    rows = []
    for seq in sorted(spec.seq_lens):
        row = {
            "implementation": spec.implementation,
            "precision": spec.precision,
            "batch_size": spec.batch_size,
            "head_dim": spec.head_dim,
            "seq_len": seq,
            "steps": spec.steps,
            "warmup": spec.warmup,
            "device_memory_bytes": _total_memory(spec, device),
        }
        predicted = predicted_bytes(spec.batch_size, seq, spec.head_dim, spec.precision)
        row.update({f"predicted_{k}_bytes": v for k, v in predicted.items()})
        start = now(device)
        with out_of_memory_is_a_result() as oom:
            row.update(measure_config(spec, seq, device), status="ok")
        if oom:
            row.update(oom.fields())
        free_memory(device)
        row["measure_s"] = now(device) - start
        compile_s = 0.0
        if spec.implementation.endswith("-compile") and row["status"] == "ok":
            steady_ms = row["forward_median_ms"] + row["backward_median_ms"]
            compile_s = max(0.0, row["first_call_ms"] - steady_ms) / 1e3
        clock.add("compile", compile_s)
        clock.add("measure", row["measure_s"] - compile_s)
        row.update(env)
        rows.append(row)
    return rows


def run_sweep_in_processes(
    spec: SweepSpec, policy: NoisePolicy, clock: PhaseClock | None = None
) -> list[dict]:
    """run_sweep in fresh processes forked from this one (which must not have started CUDA): every
    sequence length in at least policy.min_processes of them, the ones whose forward or backward
    medians still disagree in more (lmstudy.measure.repeat)."""
    clock = clock or PhaseClock()

    def measure(pending, round_index):
        what = f"process {round_index + 1} of the {spec.implementation} d={spec.head_dim} sweep"
        rows = forked_with_phases(run_sweep, dataclasses.replace(spec, seq_lens=tuple(pending)),
                                  clock=clock, what=what)
        return {r["seq_len"]: r for r in rows}

    def samples(row):
        """The slower direction decides: backward, else forward."""
        if row.get("status") != "ok":
            return None
        forward, backward = json.loads(row["forward_times_ms"]), json.loads(row["backward_times_ms"])
        return [f + b for f, b in zip(forward, backward, strict=True)]

    def gpu_busy(row):  # the GPU's time of the samples' forward and backward, in their unit (ms)
        f, b = row.get("forward_gpu_busy_ms"), row.get("backward_gpu_busy_ms")
        return f + b if f is not None and b is not None else None

    by_seq = measure_until_stable(measure, sorted(spec.seq_lens), samples, policy, progress=print,
                                  clock=clock, gpu_busy_of=gpu_busy)
    rows = []
    for seq in sorted(spec.seq_lens):
        row = combine_processes(by_seq[seq], parts=("forward_", "backward_"))
        if row["status"] == "ok":
            flops = attention_flops(spec.batch_size, seq, spec.head_dim)
            row["forward_tflops"] = rates.achieved_tflops(flops, ms=row["forward_median_ms"])
            row["backward_tflops"] = rates.achieved_tflops(2 * flops, ms=row["backward_median_ms"])
        rows.append(row)
    return rows
