"""The sharding section's job (lmstudy.registry; its files: products.py). Torch-free at import."""

from __future__ import annotations

from lmstudy.registry import Job
from lmstudy.sections.ddp.jobs import model_label, training_fields


def _sharding(config: dict, w: dict) -> dict:
    return training_fields(config, "sharding", w)


def measure(fields: dict, paths: dict):
    """AdamW's memory and step time, its state whole and sharded
    (lmstudy.measure.distributed_bench.sharding_rank): a row per phase, step and rank."""
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure import distributed_bench
    from lmstudy.measure.distributed import run_group
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    world = fields["world_size"]
    label = model_label(fields)
    with clock.timing("measure"):
        ranks = run_group(
            distributed_bench.sharding_rank,
            world,
            fields["device"],
            fields,
            f"the optimizer-state sharding of {label} ({fields['size']}, {world} processes)",
        )
    where = {
        "model": label,
        "size": fields["size"],
        "context_length": fields["context_length"],
        "batch_size": fields["batch_size"],
        "device": fields["device"],
        "world_size": world,
    }
    write_csv(paths["out"], pd.DataFrame([{**where, **row} for rank in ranks for row in rank["rows"]]))
    return clock


JOBS = {
    "sharding": Job(
        wildcards=("size", "world_size"), spec=_sharding, runner="lmstudy.sections.sharding.jobs:measure",
        model_process=False,
    )
}
