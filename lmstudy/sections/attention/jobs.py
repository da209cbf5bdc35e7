"""The attention section's measuring job (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.job_spec import device_fields, noise_fields
from lmstudy.registry import Job


def _attention(config: dict, w: dict) -> dict:
    attention = config["attention"]
    return {
        "implementation": w["impl"],
        "precision": w["precision"],
        "head_dim": int(w["head_dim"]),
        "seq_lens": attention["seq_lens"],
        "batch_size": attention["batch_size"],
        "steps": attention["steps"],
        "warmup": attention["warmup"],
        **device_fields(config),
        "noise": noise_fields(config),
    }


def measure(fields: dict, paths: dict):
    """Time and size one attention implementation over the sequence lengths, forward and backward,
    in fresh processes (lmstudy.measure.attention); a row per length to paths["out"]."""
    from lmstudy.errors import UserError

    if fields["steps"] < 2 or fields["warmup"] < 0 or min(fields["seq_lens"]) < 1 or fields["head_dim"] < 1:
        raise UserError(
            "the spec's steps must be at least 2, warmup at least 0, and sizes positive: fix the spec."
        )
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.attention import SweepSpec, run_sweep_in_processes
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.spec import from_fields
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    fields = dict(fields)
    noise = NoisePolicy(**fields.pop("noise"))
    spec = from_fields(SweepSpec, fields)
    rows = run_sweep_in_processes(spec, noise, clock)
    write_csv(paths["out"], pd.DataFrame(rows))
    for row in rows:
        detail = (
            f"forward {row['forward_median_ms']:.3f} ms, backward {row['backward_median_ms']:.3f} ms"
            if row["status"] == "ok"
            else row.get("error", "")
        )
        print(
            f"{spec.implementation} {spec.precision} d={spec.head_dim} seq={row['seq_len']}: "
            f"{row['status']} {detail}"
        )
    return clock


JOBS = {
    "attention": Job(
        wildcards=("impl", "precision", "head_dim"),
        spec=_attention,
        runner="lmstudy.sections.attention.jobs:measure",
        paths=(("out", "CSV of result rows, one per sequence length"),),
        compiles=True,
    ),
}
