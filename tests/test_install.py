"""What `make` downloads and changes on a user's machine, read from `make -n` (nothing is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def make(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "MAKEFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", *args], cwd=REPO, capture_output=True, text=True,
                          env={**environ, **(env or {})})


def dry(*args: str, env: dict | None = None) -> list[str]:
    # A VENV that does not exist: make -n then lists the venv's creation too, as on a fresh clone.
    done = make("-n", "VENV=/nonexistent/venv", *args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make here: apt-get install make")


def test_the_test_install_takes_the_cpu_build_from_pytorchs_cpu_index_then_the_default_one():
    text = "\n".join(dry("install-test"))
    pip = "/nonexistent/venv/bin/python -m pip install"
    installs = [line.strip() for line in text.splitlines()
                if line.strip().startswith(pip) and "torch==" in line]
    assert len(installs) == 2, text
    first, fallback = installs
    assert f"--index-url {CPU_INDEX}" in first
    assert "--index-url" not in fallback and "--extra-index-url" not in fallback
    # The CPU index is asked first; the default index only where it cannot be reached.
    probe = text.index(f"urlopen('{CPU_INDEX}/torch/'")
    order = [probe, text.index(first), text.index("else"), text.index("cannot be reached"),
             text.index(fallback)]
    assert order == sorted(order), order


def test_make_test_outside_ci_installs_no_system_package():
    for target in ("test", "install-test", "lint"):
        text = "\n".join(dry(target))
        for word in ("apt-get", "apt ", "dpkg", "chromium"):
            assert word not in text, (target, word, text)


def test_the_browser_target_installs_chromium_without_recommends_and_ci_runs_it():
    text = "\n".join(dry("browser"))
    assert "apt-get install" in text and "--no-install-recommends" in text and "chromium" in text
    ci = (REPO / ".ci/run").read_text().splitlines()
    commands = [line.strip() for line in ci if line.strip().startswith("make ")]
    assert commands[0] == "make browser", commands
    assert any(c.startswith("make test") for c in commands[1:]), commands


def test_make_study_checks_for_cuda_before_installing_anything():
    lines = dry("study")
    check = next(i for i, line in enumerate(lines) if "nvidia-smi" in line)
    installs = [i for i, line in enumerate(lines) if "pip install" in line or "python3 -m venv" in line]
    assert installs and check < min(installs), lines
    # The smoke preset is the CPU's: no CUDA check, the CPU build of torch.
    smoke = "\n".join(dry("study", "PRESET=smoke"))
    assert "nvidia-smi" not in smoke and f"--index-url {CPU_INDEX}" in smoke
    assert "preset=smoke" in smoke


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists(),
                    reason="this machine has an NVIDIA driver")
def test_make_study_without_cuda_stops_with_one_sentence_and_the_smoke_command(tmp_path):
    done = make("study", f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert len(said) == 1, done.stderr
    assert said[0].startswith("error: this machine has no CUDA GPU") and "make study PRESET=smoke" in said[0]
    assert not (tmp_path / "venv").exists()  # nothing was installed
    assert "Traceback" not in done.stdout + done.stderr


def test_make_unit_skips_only_the_workflow_tests_and_make_test_runs_everything():
    def pytest_line(target: str) -> str:
        return next(line for line in dry(target) if "-m pytest" in line)

    assert '-m "not workflow" tests' in pytest_line("unit")
    assert " -m " not in pytest_line("test").replace("-m pytest", "")
    # The mark is registered, so a misspelt one fails instead of leaving a test in the unit loop.
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"workflow: ' in pyproject and 'addopts = "--strict-markers"' in pyproject
