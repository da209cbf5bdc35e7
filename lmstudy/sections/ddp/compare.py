"""The data-parallel section in the comparison of two runs: step time per version, B against A, with a
verdict from the variation between ranks and steps (lmstudy.sections.comm.compare)."""

from __future__ import annotations

import pandas as pd

from lmstudy.report.contract import ComparedRuns, words
from lmstudy.report.render import Section
from lmstudy.sections.comm.compare import build, verdicts
from lmstudy.sections.ddp.tables import label


def labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with each version named as the report names it ("bucketed 10 MB")."""
    names = [label(v, b) for v, b in zip(frame["version"], frame["bucket_mb"], strict=True)]
    return frame.assign(version_label=names)


def section(runs: ComparedRuns) -> Section:
    return build(
        runs,
        "ddp",
        "Data-parallel training",
        labelled,
        ["size", "world_size", "version_label"],
        "step_s",
        words("ddp", "compare.j2", "what"),
    )


FINDINGS = (verdicts,)
