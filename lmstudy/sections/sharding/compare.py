"""The sharding section in the comparison of two runs: step time whole and sharded, B against A."""

from __future__ import annotations

from lmstudy.report.contract import ComparedRuns
from lmstudy.report.render import Section
from lmstudy.sections.comm.compare import build, median_ratio
from lmstudy.sections.sharding.tables import step_table


def section(runs: ComparedRuns) -> Section:
    return build(
        runs,
        "sharding",
        "Optimizer-state sharding",
        step_table,
        ["size", "world_size", "sharded"],
        "step_ms",
        "Step time with AdamW whole or sharded (ms)",
    )


FINDINGS = (median_ratio,)
