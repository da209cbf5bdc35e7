"""The communication section's findings: each a sentence and the rows it was computed from."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.finding import Finding, finds, rows_behind
from lmstudy.sections.comm.tables import CONFIG, bandwidth_table

KEY = tuple(CONFIG)


@finds
def link_share(frame: pd.DataFrame) -> list[Finding]:
    """The best bus bandwidth of each backend, beside the link's limit."""
    table = bandwidth_table(frame)
    out = []
    for backend, rows in table.groupby("backend", sort=True):
        best = rows.loc[rows["busbw_gbps"].idxmax()]
        where = f"{best['size_mb']:g} MB on {int(best['world_size'])} processes"
        if pd.notna(best["link_gbps"]):
            limit = (
                f", {best['busbw_of_link']:.0%} of the {best['link']} link's {best['link_gbps']:.0f} GB/s "
                "per direction read from the machine"
            )
        else:
            limit = f"; the link's limit is {best['link']} ({backend} runs on the CPUs)"
        out.append(
            Finding(
                f"{backend} reaches its highest bus bandwidth, {best['busbw_gbps']:.2f} GB/s (algorithm "
                f"bandwidth {best['algbw_gbps']:.2f} GB/s), at {where}{limit}.",
                rows_behind(rows, "busbw_gbps", "algbw_gbps", "link", "link_gbps", key=KEY),
            )
        )
    return out


@finds
def small_tensors(frame: pd.DataFrame) -> list[Finding]:
    """How far the smallest tensor falls short of the largest: latency against bandwidth."""
    table = bandwidth_table(frame)
    out = []
    for (backend, world), rows in table.groupby(["backend", "world_size"], sort=True):
        if rows["size_mb"].nunique() < 2:
            continue
        small, large = rows.loc[rows["size_mb"].idxmin()], rows.loc[rows["size_mb"].idxmax()]
        ratio = large["busbw_gbps"] / small["busbw_gbps"]
        said = (
            f"With {backend} on {int(world)} processes, {small['size_mb']:g} MB takes "
            f"{small['time_ms']:.3f} ms and reaches {small['busbw_gbps']:.2f} GB/s, {ratio:.1f}x less "
            f"bus bandwidth than {large['size_mb']:g} MB ({large['busbw_gbps']:.2f} GB/s in "
            f"{large['time_ms']:.2f} ms): a small all-reduce pays the collective's fixed latency, "
            "not the link."
        )
        if ratio <= 1:
            said = (
                f"With {backend} on {int(world)} processes, {large['size_mb']:g} MB reaches no more bus "
                f"bandwidth than {small['size_mb']:g} MB ({large['busbw_gbps']:.2f} against "
                f"{small['busbw_gbps']:.2f} GB/s): here the larger tensor's time ({large['min_ms']:.2f} to "
                f"{large['max_ms']:.2f} ms over repetitions) is set by something other than the link, "
                "such as other processes on the same cores."
            )
        out.append(
            Finding(
                said,
                rows_behind(rows, "time_ms", "busbw_gbps", key=KEY),
            )
        )
    return out


@finds
def more_processes(frame: pd.DataFrame) -> list[Finding]:
    """What more processes do to the largest tensor's time and bus bandwidth."""
    table = bandwidth_table(frame)
    out = []
    for backend, rows in table.groupby("backend", sort=True):
        largest = rows[rows["size_mb"] == rows["size_mb"].max()]
        if largest["world_size"].nunique() < 2:
            continue
        few, many = largest.loc[largest["world_size"].idxmin()], largest.loc[largest["world_size"].idxmax()]
        out.append(
            Finding(
                f"{backend}, {few['size_mb']:g} MB: from {int(few['world_size'])} to "
                f"{int(many['world_size'])} processes the time goes from {few['time_ms']:.2f} to "
                f"{many['time_ms']:.2f} ms and the bus "
                f"bandwidth from {few['busbw_gbps']:.2f} to {many['busbw_gbps']:.2f} GB/s.",
                rows_behind(largest, "time_ms", "busbw_gbps", key=KEY),
            )
        )
    return out


@finds
def variation(frame: pd.DataFrame) -> list[Finding]:
    """The largest spread between repetitions, relative to the median."""
    table = bandwidth_table(frame)
    spread = (table["max_ms"] - table["min_ms"]) / table["time_ms"]
    row = table.loc[spread.idxmax()]
    return [
        Finding(
            f"Repetitions vary most for {row['backend']} on {int(row['world_size'])} processes at "
            f"{row['size_mb']:g} MB: {row['min_ms']:.3f} to {row['max_ms']:.3f} ms around a median of "
            f"{row['time_ms']:.3f} ms; its ranks finish {row['rank_spread_ms']:.3f} ms apart (median).",
            rows_behind(table, "time_ms", "min_ms", "max_ms", "rank_spread_ms", key=KEY),
        )
    ]


FINDINGS = (link_share, small_tensors, more_processes, variation)
