"""The sharding section in the comparison of two runs: step time whole and sharded, B against A, with a
verdict from the variation between ranks and steps (lmstudy.sections.comm.compare)."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.contract import ComparedRuns, words
from lmstudy.report.render import Section
from lmstudy.sections.comm.compare import build, verdicts
from lmstudy.sections.sharding.tables import CONFIG


def stepped(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per timed step and rank (its after-step row holds the step's time)."""
    return frame[frame["phase"] == "after_step"]


def section(runs: ComparedRuns) -> Section:
    return build(
        runs,
        "sharding",
        "Optimizer-state sharding",
        stepped,
        CONFIG,
        "step_s",
        words("sharding", "compare.j2", "what"),
    )


FINDINGS = (verdicts,)
