"""The nsys section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.products import Product

# Required: what every profile job writes in every row (lmstudy.analyse.nsys.events' tables, the
# spec's configuration), without which a row says nothing: its configuration, its measured time and the
# steps that time is over. A kernel's range, path and phase are blank outside every range, so they are
# read where present (lmstudy.sections.nsys.section.load), not required.
_KERNELS = dict(
    required=("kernel", "kind", "category", "instances", "total_ns", "size", "context_length", "pass",
              "status", "profiled_steps"),
    numeric=("instances", "total_ns", "adopted_ns", "min_ns", "max_ns", "context_length"),
    may_be_empty=True,  # an OOM profile has no kernels
)
_RANGES = dict(
    required=("range", "path", "instances", "cpu_ns", "gpu_ns", "gpu_span_ns", "size", "context_length",
              "pass", "status"),
    numeric=("instances", "cpu_ns", "gpu_ns", "gpu_span_ns", "kernels", "context_length"),
    may_be_empty=True,
)
_RUN_RECORD = ("size", "context_length", "pass", "precision", "status", "backend", "profiled_steps")

PRODUCTS = (
    Product("nsys/raw/*/*/kernels.csv", "profile_model", **_KERNELS),
    Product("nsys/raw/*/*/ranges.csv", "profile_model", **_RANGES),
    Product("nsys/raw/*/*/run.json", "profile_model", required=_RUN_RECORD),
    Product("nsys/kernels.csv", "aggregate_nsys", **_KERNELS),
    Product("nsys/ranges.csv", "aggregate_nsys", **_RANGES),
    Product("nsys/runs.csv", "aggregate_nsys", required=_RUN_RECORD, numeric=("context_length",)),
    Product("nsys/backend.json", "nsys_backend", required=("backend", "requested", "executable")),
)
