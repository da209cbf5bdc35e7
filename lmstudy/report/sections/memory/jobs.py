"""The memory section's measuring job and result files (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.job_spec import model_fields
from lmstudy.products import Product
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
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()
    spec = from_fields(SnapshotSpec, fields)
    if spec.warmup_steps < 1:
        raise UserError("the spec's warmup_steps must be at least 1: recording starts after warm-up.")
    meta = capture(spec, paths["out"], clock)
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
        runner="lmstudy.report.sections.memory.jobs:measure",
        paths=(
            ("out", "the snapshot pickle to write"),
            ("meta?", "its metadata JSON (default: --out with .json)"),
        ),
        forks=False,
    ),
}

PRODUCTS = (
    Product(
        "memory/memory.csv",
        "memory_table",
        required=("size", "context_length", "pass", "precision", "status"),
        numeric=("context_length", "peak_bytes", "max_memory_allocated", "allocated_at_start_bytes"),
    ),
    Product(
        "memory/summary/*/timeline.csv",
        "memory_summary",
        required=("index", "time_ms", "action", "size_bytes", "allocated_bytes", "phase"),
        numeric=("index", "time_ms", "size_bytes", "allocated_bytes"),
    ),
    Product(
        "memory/summary/*/largest_allocations.csv",
        "memory_summary",
        required=("size_bytes", "count", "total_bytes"),
        numeric=("size_bytes", "requested_bytes", "count", "total_bytes"),
        may_be_empty=True,
    ),
    Product("memory/summary/*/kinds.csv", "memory_summary", required=("kind", "bytes"), numeric=("bytes",)),
    Product(
        "memory/summary/*/summary.json",
        "memory_summary",
        required=("snapshot", "peak_bytes", "peak_phase", "kinds_at_peak", "allocated_at_start_bytes"),
    ),
)
