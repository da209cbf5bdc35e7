"""The data-parallel section's tables, from ddp/ddp.csv: a row per version, timed step and rank."""

from __future__ import annotations

import pandas as pd

from lmstudy.sections.training_runs import step_intervals, with_model

CONFIG = ["size", "world_size", "version", "bucket_mb"]
KEY = ("size", "world_size", "version_label")


def label(version: str, bucket_mb: float) -> str:
    """A version as the report names it: "bucketed 10 MB" for each bucket size."""
    return f"bucketed {bucket_mb:g} MB" if version == "bucketed" else version


def step_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model (its label, where the rows name it), size, processes and version: the step time with
    its 95% interval over ranks and timed steps (lmstudy.sections.training_runs.step_intervals: what
    tells two versions apart), the communication
    timed on its own where it follows the backward (naive, flat; its slowest rank's, median over steps),
    and the time exposed beyond the step without communication (`none`), with its share of the step;
    for the versions that overlap, how much of flat's communication time the backward hid; and, where
    the ranges were recorded, the share of each version's own communication the backward hid."""
    config = with_model(frame, CONFIG)
    table = step_intervals(frame, config)
    comm = frame.groupby([*config, "step"], sort=False)["comm_s"].max().groupby(config, sort=False).median()
    table["comm_ms"] = comm.reindex(pd.MultiIndex.from_frame(table[config])).to_numpy() * 1e3
    table.insert(
        table.columns.get_loc("version"),
        "version_label",
        [label(v, b) for v, b in zip(table["version"], table["bucket_mb"], strict=True)],
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
    ranged = _ranged(frame, config).reindex(pd.MultiIndex.from_frame(table[config]))
    table["comm_span_ms"] = ranged["comm_span_ms"].to_numpy()
    table["hidden_share_ranges"] = ranged["hidden_share_ranges"].to_numpy()
    return table.drop(columns=["version", "bucket_mb"])


def _ranged(frame: pd.DataFrame, config: list[str]) -> pd.DataFrame:
    """From the ranges of the backward and of each all-reduce (lmstudy.measure.comm_ranges; CPU runs
    only): the communication's time per step (median over steps and ranks) and the share of it that lay
    inside the backward, pooled over the timed steps and ranks. NaN where no range was recorded."""
    if "comm_span_s" not in frame:
        return pd.DataFrame(columns=["comm_span_ms", "hidden_share_ranges"])
    grouped = frame.groupby(config, sort=False)
    spans = grouped["comm_span_s"].sum(min_count=1)
    return pd.DataFrame({
        "comm_span_ms": grouped["comm_span_s"].median() * 1e3,
        "hidden_share_ranges": grouped["comm_in_backward_s"].sum(min_count=1) / spans,
    })
