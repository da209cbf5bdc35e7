"""The ladder section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.products import Product
from lmstudy.sections.timing.products import MS_COLUMNS

_RUNG = dict(
    # Every row, whatever became of it (lmstudy.measure.ladder_bench.measure_rung): the rung, with the
    # precision it runs in, whose peak its MFU divides by.
    required=("size", "rung_key", "rung", "context_length", "batch_size", "precision", "status"),
    numeric=(
        "context_length",
        "batch_size",
        "d_model",
        "flops_per_step",
        *MS_COLUMNS,
        "first_step_s",
        "achieved_tflops",
        "gpu_busy_ms",
    ),
    samples=("step_times_ms",),
)
_LADDER = dict(
    required=(*_RUNG["required"], "matmul_tflops"),
    numeric=(*_RUNG["numeric"], "matmul_tflops", "share_of_matmul"),
)
# The matmul ceiling's bursts (lmstudy.measure.matmul_ceiling), with the clocks sampled during them.
_MATMUL = dict(
    required=("n", "burst", "products", "tflops"),
    numeric=(
        "n",
        "burst",
        "products",
        "burst_ms",
        "tflops",
        "sm_clock_mhz",
        "min_sm_clock_mhz",
        "max_sm_clock_mhz",
        "power_w",
        "power_limit_w",
        "clock_samples",
    ),
)

PRODUCTS = (
    Product("ladder/raw/*.csv", "ladder_rung", **_RUNG),
    Product("ladder/ladder.csv", "aggregate_ladder", **_LADDER),
    Product("ladder/raw_matmul/*.csv", "ladder_rung", **_MATMUL),
    Product("ladder/matmul.csv", "aggregate_ladder", **_MATMUL),
)
