"""What the data-parallel and the sharding sections' method paragraphs both say of their runs."""

from __future__ import annotations

import pandas as pd


def listed(values) -> str:
    """The distinct values, in the order seen: "2, 4"."""
    return ", ".join(str(v) for v in dict.fromkeys(values))


def method_values(frame: pd.DataFrame) -> dict:
    """The values a distributed training section's method.j2 macro takes, from its rows."""
    return {
        "sizes": listed(frame["size"]),
        "world_sizes": listed(frame["world_size"]),
        "context_length": listed(frame["context_length"]),
        "batch_size": listed(frame["batch_size"]),
        "steps": int(frame["step"].max()) + 1,
        "device": listed(frame["device"]),
    }
