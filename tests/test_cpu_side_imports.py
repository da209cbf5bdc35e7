"""The jobs after the measurements (aggregation, summaries, figures, cost, report) never load torch.

Loading it costs seconds per job; on a study of ~30 such jobs that is a
minute of the study's own cost, and those jobs run on CPU nodes.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import REPO

CPU_SIDE = [
    "lmstudy.tables",  # aggregate, render_report
    "lmstudy.nsys.aggregate",  # aggregate_nsys
    "lmstudy.memory.summary",  # memory_summary
    "lmstudy.memory.table",  # memory_table
    "lmstudy.study_cost",  # study_cost
    "lmstudy.report",  # render_report
    "lmstudy.compare.build",  # compare_runs
    *(f"lmstudy.sections.{name}" for name in
      ("timing", "nsys", "precision", "memory", "attention", "compile", "ladder", "cost")),  # figures, report
]


@pytest.mark.parametrize("module", CPU_SIDE)
def test_a_cpu_side_module_does_not_load_torch(module):
    code = f"import sys, {module}; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.strip() == "False"
