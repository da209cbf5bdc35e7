"""What a job asks a cluster scheduler for, estimated from the model's size.

Used at parse time by the workflow (resources: of the GPU rules), so it
imports neither torch nor anything that touches a GPU. The estimates are
deliberately generous: a job that outlives its time limit is killed and
has to run again, one that asks for a little too much only waits a little
longer in the queue.
"""

from __future__ import annotations

import math

from lmstudy.flops import parameter_count

# Host memory every GPU job needs whatever the model: Python, PyTorch, the
# CUDA context and the data of one batch.
BASE_MEM_MB = 4096
# Per parameter: the fp32 weights where the model lives in host memory (the
# CPU smoke runs; on a GPU it is built on the device, and this is headroom),
# plus half again for transient copies.
HOST_BYTES_PER_PARAM = 4 * 1.5
# The most host memory a job asks for, unless the workflow profile says
# otherwise (default-resources: lmstudy_max_mem_mb): a job asking for more
# than any node of the cluster has is refused at submission.
MAX_MEM_MB = 64 * 1024
# The memory of the largest GPU there is (288 GB, B300). A model whose fp32
# weights need more fails on any device as soon as it is built (out of
# memory, a result), so its job can use no more than the base time and memory.
LARGEST_DEVICE_MB = 288 * 1000**3 // 2**20

BASE_RUNTIME_MIN = 10
# Minutes per billion parameters at context length 1024 for one job (every
# pass and warm-up count of one configuration, each cold start a new process).
RUNTIME_MIN_PER_BILLION = 30
# The longest limit a job asks for, unless the profile says otherwise
# (default-resources: lmstudy_max_runtime, minutes).
MAX_RUNTIME_MIN = 24 * 60


def job_mem_mb(params: int) -> int:
    """Host memory (MiB) for one GPU job on a model of `params` parameters."""
    need = BASE_MEM_MB + params * HOST_BYTES_PER_PARAM / 2**20
    return int(min(MAX_MEM_MB, math.ceil(need / 256) * 256))


def job_runtime_min(params: int, context_length: int | None = None) -> int:
    """Wall-clock limit (minutes) for one GPU job; longer contexts take longer."""
    scale = max(1.0, (context_length or 1024) / 1024)
    need = BASE_RUNTIME_MIN + RUNTIME_MIN_PER_BILLION * params / 1e9 * scale
    return int(min(MAX_RUNTIME_MIN, math.ceil(need)))


def fits(params: int, device: str = "cuda", max_mem_mb: int = MAX_MEM_MB) -> bool:
    """Whether a model's fp32 weights can be built at all on `device`.

    On a GPU the model is built on the device: it cannot fit where its
    weights outgrow the largest GPU. On the CPU the device is the job's host
    memory, at most `max_mem_mb`.
    """
    weights_mb = params * 4 / 2**20
    room = LARGEST_DEVICE_MB if device == "cuda" else max_mem_mb - BASE_MEM_MB
    return weights_mb <= room


def gpu_job(
    dims: dict,
    vocab_size: int,
    context_length: int | None = None,
    device: str = "cuda",
    max_mem_mb: int = MAX_MEM_MB,
    max_runtime_min: int = MAX_RUNTIME_MIN,
) -> dict:
    """Scheduler resources of one GPU job: {'gpu': 1, 'runtime': min, 'mem_mb': MiB}.

    What the job can use: a model that cannot be built on `device` runs out
    of memory at once, so it asks for the base time and memory only; the
    rest scale with the model. Either way no more than the caps.
    """
    params = parameter_count(vocab_size=vocab_size, **dims)
    if fits(params, device, max_mem_mb):
        runtime, mem = job_runtime_min(params, context_length), job_mem_mb(params)
    else:
        runtime, mem = BASE_RUNTIME_MIN, BASE_MEM_MB
    return {"gpu": 1, "runtime": min(runtime, max_runtime_min), "mem_mb": min(mem, max_mem_mb)}


# What sbatch says when a request exceeds what the cluster has or allows.
REFUSALS = (
    "Requested node configuration is not available",
    "Memory required by task is not available",
    "Requested time limit is invalid",
    "exceeds some limit",
)


def refused_submission_hint(log) -> str:
    """One sentence naming the setting to change, if Snakemake's log shows a refused sbatch.

    `log` is the path (or paths) of the run's log, as Snakemake's onerror gives it.
    """
    paths = log if isinstance(log, (list, tuple)) else [log]
    text = ""
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                text += f.read()
        except (OSError, TypeError):
            continue
    if "sbatch failed" not in text or not any(r in text for r in REFUSALS):
        return ""
    return (
        "SLURM refused to queue a job because it asks for more than the cluster's nodes or "
        "partition allow: lower lmstudy_max_mem_mb (host memory, MiB) or lmstudy_max_runtime "
        "(minutes) under default-resources in profiles/slurm/config.yaml (or that rule's mem_mb "
        "or runtime under set-resources) to what your nodes have, then run again."
    )
