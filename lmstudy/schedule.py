"""What a measuring job is expected to cost, for the order the workflow starts jobs in.

On a node of several GPUs the study ends when its last GPU does: a long job
started last runs alone while the other GPUs idle. So each GPU rule's
`priority:` is its job's expected seconds (Snakemake starts the ready job of
highest priority first): longest first, the short ones fill in at the end.

Only the order matters, so the model is rough on purpose: a step's time is
its FLOPs at an effective rate, or the host's launch floor where that is
longer; each fresh process pays a fixed start; a compiled job pays its
compile once from scratch (the job's later processes find it in the job's
cache). The constants come from the quick preset's cost records on an H200
(b9d9ffa, ../shared/gpu-runs/): the 2.7B model at ctx 256 measured 37 TFLOP/s
in fp32 and 98 TFLOP/s in bf16 over its three passes, the small model's eager
bf16 training step took 56 ms (12 layers: 4.5 ms a layer), its compile 33 s.
Torch-free: the Snakefile calls it at parse time with the job's spec
(lmstudy.job_spec).
"""

from __future__ import annotations

from lmstudy.flops import flops_per_step

# The rate a step reaches (FLOP/s) by precision: PEAK x tokens / (tokens + HALF_TOKENS), fewer tokens
# a step feeding the GPU less (2.7B, 1024 tokens a step: 37 TFLOP/s fp32, 98 bf16). TF32 counts as bf16.
PEAK = {"fp32": 55e12, "bf16": 650e12, "fp16": 650e12}
HALF_TOKENS = {"fp32": 500, "bf16": 5800, "fp16": 5800}
# A step's floor where the host launches kernels slower than the GPU runs them: per layer, training step.
LAUNCH_S_PER_LAYER = 4.5e-3
# A pass's step as a share of the training step's (FLOPs: forward a third; the optimizer adds a little).
PASS_SHARE = {"forward": 1 / 3, "forward_backward": 1.0, "train_step": 1.05}
# Each fresh process: CUDA's start, the build, the profiled step, the rest; each job: its counting child,
# the environment, writing rows.
PROCESS_S = 1.5
JOB_S = 3.0
# torch.compile from scratch, per layer of the model (the small model, 12 layers: 33 s); a later
# process of the same job finds the compiled graphs in the job's cache and pays a tenth of it.
COMPILE_S_PER_LAYER = 2.75
CACHED_COMPILE_SHARE = 0.1
# Attention alone: seconds per byte of one (batch x seq x seq) score matrix for a forward and a
# backward (naive-compile, fp32: 56 ms at batch 8, seq 16384), relative cost by implementation,
# a fixed cost per sequence length (its memory accounting, the synchronizations) and each compile.
ATTENTION_S_PER_SCORE_BYTE = 6.5e-12
ATTENTION_SHARE = {"naive": 1.5, "naive-compile": 1.0, "sdpa": 0.2}
ATTENTION_SEQ_S = 0.5
ATTENTION_COMPILE_S = 10.0
# The matmul ceiling after a ladder rung: seconds per product of n x n x n at ~600 TFLOP/s, each
# burst repeated until the last bursts agree (about twice the minimum).
CEILING_RATE = 600e12
# A compiling job's imports of inductor (quick preset, H200: 10 s).
COMPILE_IMPORTS_S = 10.0
# nsys: its own Python and import torch (no job server), the capture's and the export's overhead.
NSYS_JOB_S = 15.0


def _dims(spec: dict) -> dict:
    return {k: spec[k] for k in ("vocab_size", "d_model", "d_ff", "num_layers", "num_heads")}


def step_seconds(spec: dict, pass_name: str, precision: str | None = None) -> float:
    """Expected seconds of one step of `pass_name` of the spec's model, eager."""
    precision = precision or spec["precision"]
    if precision == "fp32" and spec.get("tf32"):
        precision = "bf16"
    precision = precision if precision in PEAK else "fp32"
    tokens = spec["batch_size"] * spec["context_length"]
    rate = PEAK[precision] * tokens / (tokens + HALF_TOKENS[precision])
    train = flops_per_step("train_step", spec["batch_size"], spec["context_length"], **_dims(spec))
    floor = LAUNCH_S_PER_LAYER * spec["num_layers"]
    return PASS_SHARE[pass_name] * max(train / rate, floor)


def compile_seconds(spec: dict, processes: int) -> float:
    """torch.compile of the spec's model in a job of `processes` processes: once from scratch."""
    first = COMPILE_S_PER_LAYER * spec["num_layers"]
    return first * (1 + CACHED_COMPILE_SHARE * (processes - 1))


def _processes(spec: dict) -> int:
    return spec["noise"]["min_processes"] if "noise" in spec else 1


def expected_seconds(job: str, spec: dict) -> float:
    """Expected GPU seconds of one measuring job (lmstudy.registry's `job`) of this spec, on one GPU."""
    processes = _processes(spec)
    if job == "timing":
        steps = max(spec["warmup_steps"]) + spec["timed_steps"] + 1  # + the profiled step
        per_process = sum(steps * step_seconds(spec, p) + PROCESS_S for p in spec["passes"])
        cost = processes * per_process
        if spec["variant"].endswith("-compile"):
            cost += compile_seconds(spec, processes)
        return JOB_S + cost
    if job == "compile":
        steps = 1 + spec["warmup_steps"] + spec["timed_steps"]
        per_process = sum(2 * steps * step_seconds(spec, p) for p in spec["passes"]) + PROCESS_S
        compiles = sum(compile_seconds(spec, processes) * PASS_SHARE[p] for p in spec["passes"])
        return JOB_S + COMPILE_IMPORTS_S + processes * per_process + compiles
    if job == "ladder":
        from lmstudy.ladder_rungs import RUNGS

        rung = RUNGS[spec["rung"]]
        steps = 1 + spec["warmup_steps"] + spec["timed_steps"] + spec["profile_steps"]
        eager = step_seconds(spec, "train_step", rung.precision)
        per_process = steps * eager + PROCESS_S
        cost = processes * per_process
        if rung.compile_mode is not None:
            cost += compile_seconds(spec, processes)
        matmul = spec["matmul"]
        for n in matmul["sizes"]:
            product = 2 * n**3 / CEILING_RATE
            cost += matmul["warmup_s"] + 2 * matmul["bursts"] * matmul["burst_products"] * product
        return JOB_S + cost
    if job == "attention":
        implementation = spec["implementation"]
        element = 4 if spec["precision"] == "fp32" else 2
        steps = spec["steps"] + spec["warmup"] + 1
        per_process = PROCESS_S
        for seq in spec["seq_lens"]:
            score_bytes = spec["batch_size"] * seq * seq * element
            per_process += ATTENTION_SEQ_S + steps * ATTENTION_SHARE[implementation] * (
                ATTENTION_S_PER_SCORE_BYTE * score_bytes
            )
        cost = processes * per_process
        if implementation.endswith("-compile"):
            cost += len(spec["seq_lens"]) * ATTENTION_COMPILE_S * (1 + CACHED_COMPILE_SHARE * (processes - 1))
        return JOB_S + cost
    if job == "nsys":
        steps = spec["warmup_steps"] + spec["profiled_steps"]
        return NSYS_JOB_S + sum(steps * step_seconds(spec, p) for p in spec["passes"])
    if job == "memory":
        steps = spec["warmup_steps"] + 1
        return PROCESS_S + steps * step_seconds(spec, spec["pass_name"])
    return JOB_S + PROCESS_S  # precision: a second or two


def priority(job: str, spec: dict) -> int:
    """The rule's `priority:` of this job: its expected seconds, whole (Snakemake: highest first)."""
    return max(0, round(expected_seconds(job, spec)))
