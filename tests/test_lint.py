"""CI enforces the workflow's lint and format: snakemake --lint, snakefmt, ruff."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import REPO, SNAKEMAKE

BIN = f"{sys.executable.rsplit('/', 1)[0]}"


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)


@pytest.mark.workflow
def test_snakemake_lint_is_clean():
    # Both presets, as a user runs it: linting needs neither a GPU nor nsys
    # (CI has neither), though the full preset profiles with nsys.
    for preset in ("smoke", "full"):
        done = run(*SNAKEMAKE, "--lint", "--config", f"preset={preset}")
        assert done.returncode == 0, f"--lint failed for preset {preset}:\n{done.stdout}\n{done.stderr}"
        lints = done.stdout + done.stderr
        assert "Lints for" not in lints, f"preset {preset}:\n{lints}"


def test_snakefmt_check_is_clean():
    done = run(f"{BIN}/snakefmt", "--check", "--diff", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_is_clean():
    done = run(f"{BIN}/ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_makefiles_virtual_environment_is_ignored_by_git():
    # `make install` creates .venv (the Makefile's VENV) in the checkout; it must never be committed.
    venv = next(line.split("?=")[1].strip() for line in (REPO / "Makefile").read_text().splitlines()
                if line.startswith("VENV ?="))
    done = run("git", "check-ignore", "--no-index", "-q", f"{venv}/bin/python")
    assert done.returncode == 0, f"{venv} is not git-ignored"
