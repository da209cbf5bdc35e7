"""The memory section's measuring job (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.job_spec import model_fields
from lmstudy.registry import Job


def _memory(config: dict, w: dict) -> dict:
    memory = config["memory"]
    return {
        **model_fields(config, w["size"], w["ctx"], w["precision"]),
        "pass_name": w["mempass"],
        "warmup_steps": memory["warmup_steps"],
        "max_entries": memory["max_entries"],
        "stacks": memory["stacks"],
    }


def measure(fields: dict, paths: dict):
    """One CUDA memory snapshot of a pass after its warm-up (lmstudy.measure.memory.capture): the
    snapshot to paths["out"], its metadata to paths["meta"] (default: beside it, .json)."""
    from lmstudy.atomic import write_json
    from lmstudy.errors import UserError
    from lmstudy.measure.memory.capture import SnapshotSpec, capture
    from lmstudy.measure.repeat import forked_with_phases
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()
    spec = from_fields(SnapshotSpec, fields)
    if spec.warmup_steps < 1:
        raise UserError("the spec's warmup_steps must be at least 1: recording starts after warm-up.")
    # In a fresh process, as every other measurement: a model that crashes or exits there is named in
    # one sentence with its factory (lmstudy.measure.fresh_process), and this process stays off the GPU.
    meta = forked_with_phases(capture, spec, str(paths["out"]), clock=clock, what="the snapshot's process")
    write_json(paths["meta"] or paths["out"].with_suffix(".json"), meta)
    print(
        f"{spec.size} ctx {spec.context_length} {spec.pass_name} {spec.precision}: "
        f"{meta['status']} ({meta['stage']}), max_memory_allocated "
        f"{meta['max_memory_allocated'] / 2**30:.3f} GiB -> {paths['out']}"
    )
    return clock


JOBS = {
    "memory": Job(
        wildcards=("size", "ctx", "mempass", "precision"),
        spec=_memory,
        runner="lmstudy.sections.memory.jobs:measure",
        paths=(
            ("out", "the snapshot pickle to write"),
            ("meta?", "its metadata JSON (default: --out with .json)"),
        ),
        # The capture runs in a forked process; the model's code is imported there, once.
        model_process=False,
    ),
}
