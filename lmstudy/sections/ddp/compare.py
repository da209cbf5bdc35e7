"""The data-parallel section in the comparison of two runs: step time per version, B against A."""

from __future__ import annotations

from lmstudy.report.contract import ComparedRuns
from lmstudy.report.render import Section
from lmstudy.sections.comm.compare import build, median_ratio
from lmstudy.sections.ddp.tables import step_table


def section(runs: ComparedRuns) -> Section:
    return build(
        runs,
        "ddp",
        "Data-parallel training",
        step_table,
        ["size", "world_size", "version_label"],
        "step_ms",
        "Data-parallel step time (ms)",
    )


FINDINGS = (median_ratio,)
