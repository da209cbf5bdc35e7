"""The real-SLURM test starts nothing on a developer's machine unless asked for."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import REPO


def test_outside_ci_the_slurm_test_is_skipped_and_touches_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "LMSTUDY_TEST_SLURM")}
    etc = [Path("/etc/slurm/slurm.conf"), Path("/etc/munge/munge.key")]
    before = {p: p.exists() for p in etc}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         str(REPO / "tests/test_slurm.py"), "--basetemp", str(tmp_path / "base")],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    every_test = len(re.findall(r"^def test_", (REPO / "tests/test_slurm.py").read_text(), re.M))
    assert f"{every_test} skipped" in done.stdout and "passed" not in done.stdout
    assert "run it with `make test-slurm` or LMSTUDY_TEST_SLURM=1" in done.stdout
    assert {p: p.exists() for p in etc} == before
    assert not list((tmp_path / "base").glob("cluster*"))
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in ps
