"""The communication section's tables, from comm/comm.csv: a row per repetition and rank."""

from __future__ import annotations

import pandas as pd

CONFIG = ["backend", "world_size", "size_mb"]


def collective_times(frame: pd.DataFrame) -> pd.DataFrame:
    """Each repetition's time as the collective's: its slowest rank's (all start together from a barrier)."""
    grouped = frame.groupby([*CONFIG, "repeat"], sort=True)["seconds"]
    return grouped.agg(seconds="max", rank_spread_s=lambda s: s.max() - s.min()).reset_index()


def bandwidth_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Median time per backend, number of processes and size; algorithm and bus bandwidth as
    nccl-tests defines them (algbw = bytes / time, busbw = algbw x 2(n-1)/n); the spread between
    repetitions (min to max) and between ranks (median over repetitions); the link's limit."""
    reps = collective_times(frame)
    table = (
        reps.groupby(CONFIG, sort=True)
        .agg(
            time_ms=("seconds", "median"),
            min_ms=("seconds", "min"),
            max_ms=("seconds", "max"),
            rank_spread_ms=("rank_spread_s", "median"),
            repeats=("repeat", "nunique"),
        )
        .reset_index()
    )
    for column in ("time_ms", "min_ms", "max_ms", "rank_spread_ms"):
        table[column] *= 1e3
    sizes = frame.groupby(CONFIG, sort=True)["bytes"].first().to_numpy()
    table["algbw_gbps"] = sizes / (table["time_ms"] / 1e3) / 1e9
    n = table["world_size"]
    table["busbw_gbps"] = table["algbw_gbps"] * 2 * (n - 1) / n
    links = frame.groupby(CONFIG, sort=True)[["link", "link_gbps"]].first().reset_index(drop=True)
    table = pd.concat([table, links], axis=1)
    table["busbw_of_link"] = table["busbw_gbps"] / table["link_gbps"]
    return table
