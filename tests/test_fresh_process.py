"""Fresh processes forked from the job's: results come back, failures are named, none outlives its job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lmstudy.measure.fresh_process import ChildFailed, run_forked


def _pid_parent_and_when():
    entered = time.perf_counter()
    sum(range(1_000_000))  # milliseconds of work: longer than the parent's few steps before the fork
    return {"pid": os.getpid(), "parent": os.getppid(), "entered": entered, "left": time.perf_counter()}


def test_the_result_comes_back_from_another_process_with_its_fork_time():
    # perf_counter is CLOCK_MONOTONIC, one clock for the whole machine: the child's readings and the
    # parent's are on one time line.
    before = time.perf_counter()
    result = run_forked(_pid_parent_and_when)
    after = time.perf_counter()
    assert result["parent"] == os.getpid() != result["pid"]
    # fork_s, the job's "start" phase of this process, is the fork alone: it took time, and it
    # ended before the function began, so it holds none of the function's work.
    assert 0 < result["fork_s"] <= result["entered"] - before < result["left"] - before <= after - before
    assert "fork_s" not in run_forked(_pid_parent_and_when, with_fork_time=False)


def _raises():
    raise ValueError("the configuration is broken")


def test_an_exception_in_the_child_is_named_with_its_traceback():
    expected = r"(?s)the forward process failed.*ValueError: the configuration is broken"
    with pytest.raises(ChildFailed, match=expected):
        run_forked(_raises, what="the forward process")


def _killed():
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_child_that_dies_is_named_with_its_signal():
    expected = "the train_step process died without a result .killed by signal SIGKILL"
    with pytest.raises(ChildFailed, match=expected):
        run_forked(_killed, what="the train_step process")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_child_dies_with_its_parent(tmp_path):
    """A job killed mid-measurement leaves no measurement running on the device."""
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, time
        from lmstudy.measure.fresh_process import run_forked

        def measure():
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            while True:  # a measurement that would outlive its job
                time.sleep(1)

        run_forked(measure)
    """)], cwd=Path(__file__).resolve().parent.parent)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert _alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the fresh process outlived its killed parent"
