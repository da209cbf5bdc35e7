"""The communication section's result files (lmstudy.products)."""

from __future__ import annotations

from lmstudy.products import Product

_ROWS = dict(
    required=("backend", "device", "world_size", "size_mb", "bytes", "repeat", "rank", "seconds", "link"),
    numeric=("world_size", "warmup", "size_mb", "bytes", "repeat", "rank", "seconds", "link_gbps"),
    measured=("seconds",),
)
PRODUCTS = (
    Product("comm/raw/*.csv", "allreduce", **_ROWS),
    Product("comm/comm.csv", "aggregate_comm", **_ROWS),
)
