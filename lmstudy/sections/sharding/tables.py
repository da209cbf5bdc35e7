"""The sharding section's tables, from sharding/sharding.csv: a row per phase, step and rank."""

from __future__ import annotations

import pandas as pd

from lmstudy.sections.training_runs import step_intervals, with_model

CONFIG = ["size", "world_size", "sharded"]
KEY = ("size", "world_size", "sharded", "phase")
MB = 1e6
PHASES = ("after_init", "before_step", "after_step")


def memory_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model (its label, where the rows name it), size, processes, sharding and phase, the largest
    rank's memory: measured (the allocator's
    allocated bytes and peak, GPU only) and accounted from shapes and dtypes (parameters, gradients
    after the backward, this rank's optimizer state)."""
    config = with_model(frame, CONFIG)
    grouped = frame.groupby([*config, "phase"], sort=False)
    table = grouped.agg(
        allocated_mb=("allocated_bytes", "max"),
        peak_mb=("peak_bytes", "max"),
        params_mb=("params_bytes", "max"),
        state_mb=("state_bytes", "max"),
    ).reset_index()
    for column in ("allocated_mb", "peak_mb", "params_mb", "state_mb"):
        table[column] /= MB
    # After the backward: the gradients, and (timed steps follow warm-up) the state of the steps before.
    trained = table["phase"] != "after_init"
    table["accounted_mb"] = table["params_mb"] + (table["params_mb"] + table["state_mb"]).where(trained, 0.0)
    order = table["phase"].map({phase: i for i, phase in enumerate(PHASES)})
    return (
        table.assign(order=order).sort_values([*config, "order"]).drop(columns="order").reset_index(drop=True)
    )


def step_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Step time with and without sharding, with its 95% interval over ranks and timed steps
    (lmstudy.sections.training_runs.step_intervals)."""
    return step_intervals(frame[frame["phase"] == "after_step"], with_model(frame, CONFIG))
