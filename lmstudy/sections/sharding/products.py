"""The sharding section's result files (lmstudy.products)."""

from __future__ import annotations

from lmstudy.products import Product

_ROWS = dict(
    required=(
        "size",
        "device",
        "world_size",
        "sharded",
        "rank",
        "phase",
        "step",
        "params_bytes",
        "state_bytes",
    ),
    numeric=(
        "world_size",
        "rank",
        "step",
        "params_bytes",
        "state_bytes",
        "allocated_bytes",
        "peak_bytes",
        "step_s",
    ),
)
PRODUCTS = (
    Product("sharding/raw/*.csv", "shard_optimizer", **_ROWS),
    Product("sharding/sharding.csv", "aggregate_sharding", **_ROWS),
)
