"""The compile section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.products import Product
from lmstudy.sections.timing.products import MS_COLUMNS

_COMPILE = dict(
    required=("size", "context_length", "precision", "attention", "mode", "pass", "status", "d_model"),
    numeric=("context_length", "batch_size", "d_model", *MS_COLUMNS, "first_step_ms", "first_step_excess_s"),
    job=("size", "context_length", "precision", "attention"),
    grid=("mode", "pass"),
    # The step times of every ok row (lmstudy.measure.compile_bench, summarize_ms): what it measured.
    measured=("mean_ms", "median_ms", "min_ms", "max_ms"),
    samples=("step_times_ms",),
)

PRODUCTS = (
    Product("compile/raw/*.csv", "compile_model", **_COMPILE),
    Product("compile/compile.csv", "aggregate_compile", **_COMPILE),
)
