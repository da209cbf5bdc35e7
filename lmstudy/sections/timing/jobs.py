"""The timing section's measuring job (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy import plan
from lmstudy.job_spec import model_fields, noise_fields
from lmstudy.registry import Job


def _timing(config: dict, w: dict) -> dict:
    timing = config["timing"]
    return {
        **model_fields(config, w["size"], w["ctx"], w["precision"]),
        "variant": w["variant"],
        "passes": plan.timing_passes(w["variant"], timing["passes"]),
        "warmup_steps": timing["warmup_steps"],
        "timed_steps": timing["timed_steps"],
        "noise": noise_fields(config),
    }


def measure(fields: dict, paths: dict):
    """Time one configuration for every pass and warm-up count, each pass in fresh processes forked
    from this one (lmstudy.measure.timing.run_job); its rows to paths["out"]."""
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.timing import TimingSpec, run_job
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()  # the imports are done: torch is loaded, CUDA untouched
    rows = run_job(from_fields(TimingSpec, fields), clock)
    write_csv(paths["out"], pd.DataFrame(rows))
    for row in rows:
        print(row["pass"], "warm-up", row["warmup_steps"], row["status"],
              f"median {row['median_ms']:.3f} ms over {row['processes']} processes "
              f"(95% {row['ci_low_ms']:.3f}-{row['ci_high_ms']:.3f}, spread {row['process_spread']:.1%})"
              if row["status"] == "ok" else "")
    return clock


JOBS = {
    "timing": Job(
        wildcards=("size", "ctx", "precision", "variant"),
        spec=_timing,
        runner="lmstudy.sections.timing.jobs:measure",
        compiles=True,
    ),
}
