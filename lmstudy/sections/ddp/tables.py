"""The data-parallel section's tables, from ddp/ddp.csv: a row per version, timed step and rank."""

from __future__ import annotations

import pandas as pd

CONFIG = ["size", "world_size", "version", "bucket_mb"]
KEY = ("size", "world_size", "version_label")


def label(version: str, bucket_mb: float) -> str:
    """A version as the report names it: "bucketed 10 MB" for each bucket size."""
    return f"bucketed {bucket_mb:g} MB" if version == "bucketed" else version


def step_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per size, processes and version: the median step time (a step's time is its slowest rank's)
    and the range of its timed steps (what tells two versions apart),
    the communication timed on its own where it follows the backward (naive, flat), and the time
    exposed beyond the step without communication (`none`), with its share of the step; for the
    versions that overlap, how much of flat's communication time the backward hid."""
    steps = frame.groupby([*CONFIG, "step"], sort=False)[["step_s", "comm_s"]].max().reset_index()
    table = steps.groupby(CONFIG, sort=False).agg(
        step_ms=("step_s", "median"), step_min_ms=("step_s", "min"), step_max_ms=("step_s", "max"),
        comm_ms=("comm_s", "median"),
    )
    table = table.reset_index()
    table[["step_ms", "step_min_ms", "step_max_ms", "comm_ms"]] *= 1e3
    table.insert(
        2, "version_label", [label(v, b) for v, b in zip(table["version"], table["bucket_mb"], strict=True)]
    )
    base = table[table["version"] == "none"].set_index(["size", "world_size"])["step_ms"]
    flat = table[table["version"] == "flat"].set_index(["size", "world_size"])["comm_ms"]
    where = pd.MultiIndex.from_frame(table[["size", "world_size"]])
    table["no_comm_ms"] = base.reindex(where).to_numpy()
    table["exposed_comm_ms"] = (table["step_ms"] - table["no_comm_ms"]).where(table["version"] != "none")
    table["comm_share"] = table["exposed_comm_ms"] / table["step_ms"]
    flat_comm = flat.reindex(where).to_numpy()
    overlapping = ~table["version"].isin(["none", "naive", "flat"])
    table["hidden_share"] = (1 - table["exposed_comm_ms"] / flat_comm).where(overlapping).clip(0, 1)
    return table.drop(columns=["version", "bucket_mb"])
