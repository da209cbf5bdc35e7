"""The data-parallel section's result files (lmstudy.products)."""

from __future__ import annotations

from lmstudy.products import Product

_ROWS = dict(
    required=("size", "device", "world_size", "version", "bucket_mb", "step", "rank", "step_s"),
    numeric=(
        "world_size", "bucket_mb", "step", "rank", "step_s", "comm_s", "gradient_bytes",
        "backward_s", "comm_span_s", "comm_in_backward_s",
    ),
    measured=("step_s",),
)
PRODUCTS = (
    Product("ddp/raw/*.csv", "train_ddp", **_ROWS),
    Product("ddp/ddp.csv", "aggregate_ddp", **_ROWS),
)
