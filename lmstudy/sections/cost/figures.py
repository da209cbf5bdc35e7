"""The cost section, the study's own cost: where this run's time went, by section, rule and phase.

The functions that draw its figures (matplotlib).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse.study_cost import PHASE_COLUMNS  # noqa: E402
from lmstudy.sections.cost.tables import by_section, phase_names  # noqa: E402


def draw_figures(frame: pd.DataFrame, out_dir: Path) -> None:
    """The job seconds by section and phase, from the loaded table."""
    table = by_section(frame)
    columns = [c for c in [*PHASE_COLUMNS, "other_s"] if table[c].sum() > 0]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(table) + 1.6))
    left = pd.Series(0.0, index=table.index)
    for column in columns:
        ax.barh(table.index, table[column], left=left, label=phase_names(frame)[column])
        left += table[column]
    ax.invert_yaxis()
    ax.set_xlabel("job seconds, added up")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.tight_layout()
    fig.savefig(out_dir / "cost.png")
    plt.close(fig)
