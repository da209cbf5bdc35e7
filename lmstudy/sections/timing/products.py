"""The timing section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

from __future__ import annotations

from lmstudy import plan, rates
from lmstudy.products import Product, first_row


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
    expected = rates.tokens_per_second(frame["batch_size"] * frame["context_length"], ms=frame["median_ms"])
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
