"""The jobs after the measurements (aggregation, summaries, figures, cost, report) never load torch.

Loading it costs seconds per job; on a study of ~30 such jobs that is a
minute of the study's own cost, and those jobs run on CPU nodes, where
torch may not even be installed. Every CPU-side script, run as the workflow
runs it (the smoke run) or by hand on a real GPU capture (the memory
scripts, which the CPU smoke run has no snapshot for), exits without torch
ever imported: what it imports at run time, from the library or from
elsewhere, whatever the sources say. The sources' side of it (lmstudy/analyse
and lmstudy/report import no torch, not even in a function) is
tests/test_import_graph.py's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, IMPORT_PROBE, import_probe_env

# Every command a CPU-side rule runs (python -m lmstudy <command>).
CPU_SCRIPTS = [
    "aggregate", "aggregate_nsys", "memory_summary", "memory_table",
    "make_figures", "render_report", "study_cost", "ladder_table",
]
# Run by hand below: the smoke run is on a CPU and records no memory snapshot.
BY_HAND = {"memory_summary", "memory_table"}


def _records(folder: Path) -> list[dict]:
    """The probe's records, each with the command it ran as its `script` (python -m lmstudy <command>:
    the word after lmstudy's __main__.py)."""
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    for record in records:
        if record["script"] == "__main__.py" and len(record["argv"]) > 1:
            record["script"] = f"{record['argv'][1]}.py"
    return records


@pytest.mark.parametrize("script", sorted(set(CPU_SCRIPTS) - BY_HAND))
def test_a_cpu_side_job_of_the_workflow_never_imports_torch(smoke_run: Path, script):
    runs = [r for r in _records(smoke_run / IMPORT_PROBE) if r["script"] == f"{script}.py"]
    assert runs, f"the smoke run ran no {script} job"
    imported = [" ".join(r["argv"]) for r in runs if r["torch"]]
    assert not imported, f"these jobs imported torch: {imported}"
    # The probe works: the measuring jobs of the same run did import it.
    timing = [r for r in _records(smoke_run / IMPORT_PROBE) if r["argv"][1:3] == ["measure", "timing"]]
    assert timing and all(r["torch"] for r in timing)


def test_the_memory_scripts_never_import_torch(tmp_path: Path):
    probe = tmp_path / IMPORT_PROBE
    probe.mkdir()
    name = "small_ctx256_forward_bf16"
    for suffix in (".pickle", ".json"):
        shutil.copy(FIXTURES / "gpu" / f"snapshot_{name}{suffix}", tmp_path / f"{name}{suffix}")
    summary = tmp_path / "summary" / name
    env = {**os.environ, **import_probe_env(probe)}
    for argv in (
        ["memory_summary", str(tmp_path / f"{name}.pickle"), "--out", str(summary), "--top", "10"],
        ["memory_table", "--out", str(tmp_path / "memory.csv"), "--sizes", "small",
         "--context-lengths", "256", "--passes", "forward", "--precisions", "bf16",
         "--summaries", str(summary / "summary.json")],
    ):
        subprocess.run([sys.executable, "-m", "lmstudy", *argv],
                       cwd=tmp_path, env=env, check=True, capture_output=True)
    runs = {r["script"]: r["torch"] for r in _records(probe)}
    assert runs == {"memory_summary.py": False, "memory_table.py": False}
