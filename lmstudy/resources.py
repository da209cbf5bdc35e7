"""What a job asks a cluster scheduler for, estimated from the model's size.

Used at parse time by the workflow (resources: of the GPU rules), so it
imports neither torch nor anything that touches a GPU. The estimates are
deliberately generous: a job that outlives its time limit is killed and
has to run again, one that asks for a little too much only waits a little
longer in the queue.
"""

from __future__ import annotations

import math

# Host memory every GPU job needs whatever the model: Python, PyTorch, the
# CUDA context and the data of one batch.
BASE_MEM_MB = 4096
# Per parameter: the fp32 weights where the model lives in host memory (the
# CPU smoke runs; on a GPU it is built on the device, and this is headroom),
# plus half again for transient copies.
HOST_BYTES_PER_PARAM = 4 * 1.5
# The most host memory a job asks for. A size larger than this fails in the
# job (recorded as out of memory) instead of never being scheduled.
MAX_MEM_MB = 64 * 1024

BASE_RUNTIME_MIN = 10
# Minutes per billion parameters at context length 1024 for one job (every
# pass and warm-up count of one configuration, each cold start a new process).
RUNTIME_MIN_PER_BILLION = 30
MAX_RUNTIME_MIN = 24 * 60


def parameter_count(d_model: int, d_ff: int, num_layers: int, vocab_size: int, **_) -> int:
    """Parameters of lmstudy.model's Transformer LM (no biases, untied head).

    Per block: q, k, v, output projections (4 d^2), SwiGLU (3 d d_ff) and
    two RMSNorm gains (2 d); plus token embedding, LM head and final norm.
    """
    block = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
    return num_layers * block + 2 * vocab_size * d_model + d_model


def job_mem_mb(params: int) -> int:
    """Host memory (MiB) for one GPU job on a model of `params` parameters."""
    need = BASE_MEM_MB + params * HOST_BYTES_PER_PARAM / 2**20
    return int(min(MAX_MEM_MB, math.ceil(need / 256) * 256))


def job_runtime_min(params: int, context_length: int | None = None) -> int:
    """Wall-clock limit (minutes) for one GPU job; longer contexts take longer."""
    scale = max(1.0, (context_length or 1024) / 1024)
    need = BASE_RUNTIME_MIN + RUNTIME_MIN_PER_BILLION * params / 1e9 * scale
    return int(min(MAX_RUNTIME_MIN, math.ceil(need)))


def gpu_job(dims: dict, vocab_size: int, context_length: int | None = None) -> dict:
    """Scheduler resources of one GPU job: {'gpu': 1, 'runtime': min, 'mem_mb': MiB}."""
    params = parameter_count(vocab_size=vocab_size, **dims)
    return {
        "gpu": 1,
        "runtime": job_runtime_min(params, context_length),
        "mem_mb": job_mem_mb(params),
    }
