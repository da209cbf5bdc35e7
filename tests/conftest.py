"""Shared fixtures: the smoke workflow, run once per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]


def snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run Snakemake on this repository's workflow in `workdir` (in `env`, else this process's)."""
    done = subprocess.run(
        [*SNAKEMAKE, "-d", str(workdir), *args],
        capture_output=True, text=True, cwd=workdir,
        env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        )
    return done


def new_workdir(tmp: Path) -> Path:
    """A working directory with its own copy of config.yaml, as a user has."""
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "config.yaml", tmp / "config.yaml")
    return tmp


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """A complete smoke-preset run of the whole workflow on the CPU."""
    workdir = new_workdir(tmp_path_factory.mktemp("smoke"))
    snakemake(workdir, "--cores", "2", "--config", "preset=smoke")
    return workdir


def timing_job(spec) -> list[dict]:
    """lmstudy.timing.run_job(spec) in a process of its own, as scripts/time_model.py runs it.

    The job forks one fresh process per pass; a process that already ran
    CPU work in parallel (this test session has) cannot fork safely, since
    OpenMP's thread pool does not survive a fork.
    """
    import dataclasses
    import json

    code = (
        "import json, sys\n"
        "from lmstudy.timing import TimingSpec, run_job\n"
        "data = json.loads(sys.argv[1])\n"
        "data.update(passes=tuple(data['passes']), warmup_steps=tuple(data['warmup_steps']))\n"
        "print(json.dumps(run_job(TimingSpec(**data)), default=str))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(dataclasses.asdict(spec))],
        capture_output=True, text=True, cwd=REPO, check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"the timing job failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
