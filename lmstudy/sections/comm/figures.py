"""The communication section's figure (matplotlib): bus bandwidth against tensor size."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.comm.tables import bandwidth_table  # noqa: E402


def draw_figures(frame: pd.DataFrame, out_dir: Path) -> None:
    fig = bandwidth_figure(frame)
    fig.savefig(out_dir / "bandwidth.png")
    plt.close(fig)


def bandwidth_figure(frame: pd.DataFrame):
    """bandwidth.png: per backend, the bus bandwidth of each number of processes against the tensor's
    size on log axes, its bar the range over repetitions (from the slowest and the quickest repetition),
    beside the link's limit per direction where the machine said it."""
    table = bandwidth_table(frame)
    backends = sorted(table["backend"].unique())
    fig, axes = plots.subplots(1, len(backends), figsize=(5.2 * len(backends) + 1.6, 4))
    for ax, backend in zip(axes[0], backends, strict=True):
        rows = table[table["backend"] == backend]
        for world, line in rows.groupby("world_size", sort=True):
            line = line.sort_values("size_mb")
            # The quickest repetition gives the highest bandwidth and the slowest the lowest.
            high = line["busbw_gbps"] * line["time_ms"] / line["min_ms"]
            low = line["busbw_gbps"] * line["time_ms"] / line["max_ms"]
            ax.errorbar(line["size_mb"], line["busbw_gbps"],
                        yerr=[line["busbw_gbps"] - low, high - line["busbw_gbps"]],
                        marker="o", capsize=3, label=f"{int(world)} processes")
        limits = rows.dropna(subset=["link_gbps"]).drop_duplicates("link")
        for _, limit in limits.iterrows():
            ax.axhline(limit["link_gbps"], color="0.35", ls=":", lw=1,
                       label=f"{limit['link']} limit, {limit['link_gbps']:.0f} GB/s per direction")
        ax.set_title(backend if not limits.empty else f"{backend} (the link's limit unknown)")
        ax.set_xlabel("tensor size (MB of float32)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        plots.plain_log(ax, "x")
        plots.plain_log(ax, "y")
    plots.legend_outside(fig, axes)
    return fig
