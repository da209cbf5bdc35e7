"""The model's process: a user's model code imported once a job, where that is safe.

A job that forks measuring processes (timing, torch.compile, the ladder)
would otherwise import the model's code (the factory's module, and
transformers for a Hugging Face model: seconds each) in every one of them,
because the process that forks them must never run it
(lmstudy.measure.fresh_process). Instead the job's process forks one child,
the model's process, which imports that code and builds the model once on
the meta device (its lazy imports: nothing allocated), then asks whether
CUDA is still untouched (fresh_process.cuda_started, torch's and the
driver's answer):

- untouched: the model's process runs the job. It becomes the process that
  forks the measuring ones, which inherit the imports and import nothing
  again; every fork is still checked first, as any fork is.
- started (the module touched the GPU when imported or built on the meta
  device): no child of it could use CUDA. It says so in the job's log and
  exits, and the job's own process, which never ran the user's code, runs
  the job as before: each measuring process imports the code afresh, with
  CUDA of its own.

Either way the job's own process never imports the user's code, and the
built-in model (no code to import) runs the job there directly. Torch is
imported only by the child.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lmstudy import job_process, phases
from lmstudy.measure import fresh_process
from lmstudy.model_choice import ModelChoice

DIMENSIONS = ("vocab_size", "d_model", "d_ff", "num_layers", "num_heads")


def users_model(spec: dict) -> ModelChoice | None:
    """The model a job's spec names, where it is a user's (code to import); None otherwise."""
    if "model" not in spec:
        return None
    choice = ModelChoice.coerce(spec["model"])
    return None if choice.builtin else choice


def run_with_model_imported(run: Callable[[], None], spec: dict) -> bool:
    """`run()` (the job) in the model's process, where importing the user's model there leaves CUDA
    untouched: True once it ran; False where it would not be safe (the caller runs the job itself)."""
    choice = users_model(spec)
    if choice is None:
        return False
    if job_process.PROCESS_STARTED_AT is None:  # the job's clock starts with this process, not the child
        job_process.PROCESS_STARTED_AT = time.time() - job_process.seconds_since_process_start()
    result = fresh_process.run_forked(
        _model_process, run, choice, spec, with_fork_time=False, what=f"the model's process of {choice.label}"
    )
    if not result["ran"]:
        print(
            f"The model's code ({choice.factory}) started CUDA when imported ({result['why']}): each "
            "measuring process imports it afresh instead, once per process.",
            flush=True,
        )
    return result["ran"]


def _model_process(run: Callable[[], None], choice: ModelChoice, spec: dict) -> dict:
    from lmstudy.measure.factory import import_model_code, load_factory

    started = time.perf_counter()
    fresh_process.watch_cuda_start()  # so that a refusal can name what started CUDA
    if all(key in spec for key in (*DIMENSIONS, "context_length")):
        import_model_code(choice, {k: spec[k] for k in DIMENSIONS}, spec["context_length"])
    else:
        load_factory(choice.factory)
    how = fresh_process.cuda_started()
    if how is not None:
        first = fresh_process.first_cuda_call()
        return {"ran": False, "why": how + (f"; first: {first}" if first else "")}
    phases.EARLIER["model_imports"] = time.perf_counter() - started
    fresh_process.mark_forking_parent()
    run()
    return {"ran": True}
