"""The communication section's job (lmstudy.registry; its files: products.py). Torch-free at import."""

from __future__ import annotations

from lmstudy.registry import Job

# The device each backend's tensors live on: NCCL on GPUs, Gloo on the CPUs.
DEVICE_OF = {"nccl": "cuda", "gloo": "cpu"}


def backends(config: dict) -> list[str]:
    """The backends this run measures: Gloo alone where the study's device is the CPU."""
    wanted = config["comm"]["backends"]
    return [b for b in wanted if config["device"] == "cuda" or DEVICE_OF[b] == "cpu"]


def _allreduce(config: dict, w: dict) -> dict:
    """One backend at one number of processes: every tensor size, its warm-ups and repetitions."""
    comm = config["comm"]
    return {
        "backend": w["backend"],
        "world_size": int(w["world_size"]),
        "device": DEVICE_OF[w["backend"]],
        "sizes_mb": comm["sizes_mb"],
        "warmup": comm["warmup"],
        "repeats": comm["repeats"],
    }


def allreduce(fields: dict, paths: dict):
    """All-reduce float32 tensors of each size in `world_size` processes: a row per repetition and rank
    (lmstudy.measure.distributed_bench.allreduce_rank), with the link's limit (lmstudy.measure.link_limit)."""
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure import distributed_bench, link_limit
    from lmstudy.measure.distributed import run_group
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    world = fields["world_size"]
    with clock.timing("start"):
        link = link_limit.read(fields["device"], world)
    with clock.timing("measure"):
        ranks = run_group(
            distributed_bench.allreduce_rank,
            world,
            fields["device"],
            fields,
            f"the all-reduce benchmark ({fields['backend']}, {world} processes)",
        )
    where = {
        "backend": fields["backend"],
        "device": fields["device"],
        "world_size": world,
        "warmup": fields["warmup"],
    }
    rows = [{**where, **row, **link} for rank in ranks for row in rank["rows"]]
    write_csv(paths["out"], pd.DataFrame(rows))
    return clock


JOBS = {
    "allreduce": Job(
        wildcards=("backend", "world_size"), spec=_allreduce, runner="lmstudy.sections.comm.jobs:allreduce"
    )
}
