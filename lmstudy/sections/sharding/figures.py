"""The sharding section's figure (matplotlib): memory per phase, AdamW's state whole and sharded."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.sections import plots  # noqa: E402
from lmstudy.sections.sharding.tables import PHASES, memory_table  # noqa: E402

PHASE_LABELS = {"after_init": "after init", "before_step": "before the step", "after_step": "after the step"}


def measure_of(table: pd.DataFrame) -> tuple[str, str]:
    """(column, axis label): the allocator's memory where it was measured (GPU), else the memory
    accounted from shapes and dtypes (a CPU run has no allocator statistics)."""
    if plots.has_values(table["allocated_mb"]):
        return "allocated_mb", "allocated memory, largest rank (MB)"
    return "accounted_mb", "memory accounted from shapes, largest rank (MB)"


def draw_figures(frame: pd.DataFrame, out_dir: Path) -> None:
    """memory.png: a panel per size and number of processes; per phase, a bar with the state whole and
    one with it sharded."""
    table = memory_table(frame)
    column, label = measure_of(table)
    groups = list(table.groupby(["size", "world_size"], sort=False))
    fig, axes = plots.subplots(1, len(groups), figsize=(4.6 * len(groups) + 1.8, 3.8))
    width = 0.38
    for ax, ((size, world), rows) in zip(axes[0], groups, strict=True):
        for offset, sharded, name in ((-width / 2, False, "state whole"), (width / 2, True, "state sharded")):
            part = rows[rows["sharded"].astype(str) == str(sharded)].set_index("phase").reindex(PHASES)
            ax.bar([i + offset for i in range(len(PHASES))], part[column], width,
                   color="tab:gray" if not sharded else "tab:green", label=name)
        ax.set_xticks(range(len(PHASES)), [PHASE_LABELS[p] for p in PHASES])
        ax.set_title(f"{size}, {int(world)} processes")
        ax.set_ylabel(label)
    plots.legend_outside(fig, axes)
    fig.savefig(out_dir / "memory.png")
    plt.close(fig)
