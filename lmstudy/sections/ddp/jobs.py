"""The data-parallel section's job (lmstudy.registry; its files: products.py). Torch-free at import."""

from __future__ import annotations

from lmstudy.job_spec import model_choice
from lmstudy.model_choice import STANDARD_KEYS, ModelChoice
from lmstudy.registry import Job


def training_fields(config: dict, section: str, w: dict) -> dict:
    """The study's model (config model:, the built-in one or the user's) of one size trained
    data-parallel in `world_size` processes on the study's device: its factory and dimensions, the
    batch each rank trains on, the warm-up and timed steps."""
    settings = config[section]
    dims = config["sizes"][w["size"]]
    return {
        "size": w["size"],
        **{key: dims[key] for key in STANDARD_KEYS},
        "model": model_choice(config, w["size"]),
        "vocab_size": config["vocab_size"],
        "context_length": settings["context_length"],
        "batch_size": config["batch_size"],
        "world_size": int(w["world_size"]),
        "device": config["device"],
        "warmup_steps": settings["warmup_steps"],
        "timed_steps": settings["timed_steps"],
    }


def model_label(fields: dict) -> str:
    """The label of the model a training spec names (its rows' `model`), read without its code."""
    return ModelChoice.coerce(fields["model"]).label


def _ddp(config: dict, w: dict) -> dict:
    settings = config["ddp"]
    return {
        **training_fields(config, "ddp", w),
        "versions": settings["versions"],
        "bucket_mb": settings["bucket_mb"],
    }


def train(fields: dict, paths: dict):
    """Each data-parallel version's timed steps (lmstudy.measure.distributed_bench.ddp_rank): a row per
    version, step and rank."""
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
            distributed_bench.ddp_rank,
            world,
            fields["device"],
            fields,
            f"the data-parallel training of {label} ({fields['size']}, {world} processes)",
        )
    where = {
        "model": label,
        "size": fields["size"],
        "context_length": fields["context_length"],
        "batch_size": fields["batch_size"],
        "device": fields["device"],
        "world_size": world,
        "gradient_bytes": ranks[0]["gradient_bytes"],
    }
    write_csv(paths["out"], pd.DataFrame([{**where, **row} for rank in ranks for row in rank["rows"]]))
    return clock


JOBS = {
    "ddp": Job(
        wildcards=("size", "world_size"),
        spec=_ddp,
        runner="lmstudy.sections.ddp.jobs:train",
        model_process=False,
    )
}
