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


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run Snakemake on this repository's workflow in `workdir`."""
    done = subprocess.run(
        [*SNAKEMAKE, "-d", str(workdir), *args],
        capture_output=True, text=True, cwd=workdir, env={**os.environ, "PYTHONUNBUFFERED": "1"},
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
