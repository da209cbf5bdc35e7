"""The torch.compile section's measuring job (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.job_spec import model_fields, noise_fields
from lmstudy.registry import Job


def _compile(config: dict, w: dict) -> dict:
    compiled = config["compile"]
    return {
        **model_fields(config, w["size"], w["ctx"], w["precision"]),
        "attention": w["attention"],
        "passes": compiled["passes"],
        "warmup_steps": compiled["warmup_steps"],
        "timed_steps": compiled["timed_steps"],
        "noise": noise_fields(config),
    }


def measure(fields: dict, paths: dict):
    """Time the whole model eager and under torch.compile, per pass, from the same initial weights;
    the compiled model's first step (trace and compile) apart from its steady state."""
    from lmstudy.errors import UserError

    if fields["timed_steps"] < 2 or fields["warmup_steps"] < 0:
        raise UserError("the spec's timed_steps must be at least 2, warmup_steps at least 0: fix the spec.")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.compile_bench import CompileSpec, run_job_in_processes
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()
    fields = dict(fields)
    noise = NoisePolicy(**fields.pop("noise"))
    rows = run_job_in_processes(from_fields(CompileSpec, fields), noise, clock)
    write_csv(paths["out"], pd.DataFrame(rows))
    for row in rows:
        detail = (
            f"first {row['first_step_ms']:.1f} ms, median {row['median_ms']:.3f} ms"
            if row["status"] == "ok"
            else row.get("error", "")
        )
        print(f"{row['mode']} {row['pass']}: {row['status']} {detail}")
    return clock


JOBS = {
    "compile": Job(
        wildcards=("size", "ctx", "precision", "attention"),
        spec=_compile,
        runner="lmstudy.sections.compile.jobs:measure",
        compiles=True,
    ),
}
