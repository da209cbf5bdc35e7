"""A job stops with its workflow, and at its time limit says where it was (lmstudy.launch.watch):
real wrappers, a real job server, real processes (issue 32, items 7 and 11)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO
from .specs import spec_fields
from .test_job_server import server_env
from .test_scripts_by_hand import TINY_SPEC

# A job that says who it is, then blocks until it is killed.
BLOCKING_JOB = """
import os, sys, threading
open(sys.argv[1], "w").write(str(os.getpid()))
threading.Event().wait()
"""


def _gone(pid: int, within_s: float = 30.0) -> bool:
    """Whether process `pid` is gone (or a zombie nobody reaped yet) within `within_s`."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)  # polling for a state, not timing anything
    return False


def _pid_from(path: Path, process: subprocess.Popen, within_s: float = 120.0) -> int:
    end = time.monotonic() + within_s
    while time.monotonic() < end and process.poll() is None:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"the job never started: {process.communicate()}")


@pytest.mark.parametrize("route", ["job server", "own process"])
def test_a_job_stops_when_the_workflow_that_started_it_is_killed(tmp_path, route):
    script = tmp_path / "job.py"
    script.write_text(BLOCKING_JOB)
    workflow = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"])
    env = server_env(tmp_path, LMSTUDY_WORKFLOW_PID=str(workflow.pid))
    if route == "own process":
        env["LMSTUDY_JOB_SERVER"] = "0"
    wrapper = subprocess.Popen([sys.executable, str(REPO / "scripts/run_script.py"), str(script),
                                str(tmp_path / "pid")], env=env, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job = None
    try:
        job = _pid_from(tmp_path / "pid", wrapper)
        workflow.kill()  # kill -9 of snakemake
        workflow.wait()
        _, stderr = wrapper.communicate(timeout=60)
        assert _gone(job), "the job went on after its workflow died"
    finally:  # nothing of this test outlives it, whatever happened
        for process in (workflow, wrapper):
            process.kill()
        if job is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(job, 9)
    # Through the server the wrapper stops the job; in its own process its watching child kills it.
    assert wrapper.returncode == (143 if route == "job server" else -9)
    assert stderr.strip().splitlines()[-1] == (
        f"error: the workflow that started this job (Snakemake, pid {workflow.pid}) is gone, so the "
        "job was stopped with it: run snakemake again to redo it.")


def test_a_factory_that_blocks_at_import_is_stopped_at_the_time_limit_saying_where(tmp_path):
    factory = tmp_path / "blocking_factory.py"
    factory.write_text("import threading\nthreading.Event().wait()  # a lock nobody releases\n")
    model = {"factory": f"{factory}:build", "name": "", "range_depth": 0, "extra": []}
    spec = json.dumps(spec_fields("timing", size="s", **TINY_SPEC, precision="fp32", variant="naive",
                                  model=model))
    env = server_env(tmp_path, LMSTUDY_RUNTIME_MIN="0.1")
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/gpu_lease.py"), "--", sys.executable,
         "-m", "lmstudy", "measure", "timing", "--spec", spec, "--out", str(tmp_path / "t.csv")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode == 143, log[-3000:]
    assert f'File "{factory}", line 2 in <module>' in log, log[-3000:]
    assert log.strip().splitlines()[-1].startswith(
        "error: the job ran past its time limit of 0.1 minutes (its runtime resource) and was stopped; the "
        "stacks above show where it was"), log[-3000:]
    assert not (tmp_path / "t.csv").exists()
