"""The timing section's measuring job and result files (lmstudy.registry). Torch- and pandas-free."""

from __future__ import annotations

from lmstudy import plan
from lmstudy.job_spec import model_fields, noise_fields
from lmstudy.products import Product, first_row
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
        runner="lmstudy.report.sections.timing.jobs:measure",
        compiles=True,
    ),
}


def _timing_job_grid(job: dict, grid: set) -> set:
    """A timing job measures the passes lmstudy.plan gives its variant (a compiled one: the training step)."""
    passes = plan.timing_passes(job["variant"], sorted({p for p, _ in grid}))
    return {(p, w) for p, w in grid if p in passes}


MS_COLUMNS = ("mean_ms", "std_ms", "median_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "iqr_ms")


def _timing_consistent(frame) -> str | None:
    """tokens/s is the batch's tokens over the median step (lmstudy.measure.timing.rows_from_trajectory)."""
    if not {"tokens_per_s", "median_ms", "batch_size", "context_length", "status"} <= set(frame.columns):
        return None
    ok = frame["status"] == "ok"
    expected = frame["batch_size"] * frame["context_length"] / (frame["median_ms"] / 1e3)
    off = ok & ((frame["tokens_per_s"] - expected).abs() > 1e-6 * expected.abs())
    if off.any():
        value = float(frame["tokens_per_s"][off].iloc[0])
        return f"row {first_row(off)} has tokens_per_s {value!r}, not its median step's"
    order = ok & ~((frame["min_ms"] <= frame["median_ms"]) & (frame["median_ms"] <= frame["max_ms"]))
    if order.any():
        return f"row {first_row(order)} has a median_ms outside its min_ms and max_ms"
    return None


_TIMING = dict(
    required=("size", "context_length", "pass", "precision", "variant", "warmup_steps", "status", "params"),
    numeric=("context_length", "batch_size", "warmup_steps", "timed_steps", "params", "matmul_params",
             *MS_COLUMNS, "tokens_per_s"),
    job=("size", "context_length", "precision", "variant"),
    grid=("pass", "warmup_steps"),
    job_grid=_timing_job_grid,
    measured=("mean_ms", "median_ms", "min_ms", "max_ms", "tokens_per_s"),
    consistent=_timing_consistent,
    samples=("step_times_ms",),
)

PRODUCTS = (
    Product("timing/raw/*.csv", "time_model", **_TIMING),
    Product("timing/timing.csv", "aggregate_timing", **_TIMING),
)
