"""Issue 40: our environment variables and number options take no value silently: a value that is
not one they take is said in one sentence naming the variable and the fix."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from lmstudy import cli
from lmstudy.job_process import RUNTIME_ENV, SettingError
from lmstudy.launch import job_server
from lmstudy.launch.cpu_placement import PINNING_ENV, pinning_wanted
from lmstudy.launch.watch import Watch

from .conftest import REPO


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf"])
def test_a_time_limit_that_is_not_minutes_is_said_not_taken_for_none(value):
    with pytest.raises(SettingError, match=f"^{RUNTIME_ENV}='{value}' is not a job's time limit in minutes"):
        Watch({RUNTIME_ENV: value})
    assert Watch({RUNTIME_ENV: "0"}).deadline is None and Watch({RUNTIME_ENV: "1.5"}).minutes == 1.5


COMMAND = [sys.executable, "-m", "lmstudy", "aggregate"]


@pytest.mark.parametrize(("variable", "value", "said"), [
    (job_server.ENABLE_ENV, "maybe", "is neither on nor off: set it to 1 or 0"),
    (job_server.TIMEOUT_ENV, "abc", "is not how long a job waits for the job server, in seconds"),
    (job_server.TIMEOUT_ENV, "0", "set it to a number above 0"),
    (job_server.IDLE_ENV, "soon", "is not how long an idle job server stays, in seconds"),
])
def test_the_job_servers_settings_are_said_before_it_starts(variable, value, said):
    with pytest.raises(SettingError, match=f"^{variable}='{value}' .*{said}"):
        job_server.wanted(COMMAND, {variable: value})


def test_pinning_is_on_or_off():
    assert pinning_wanted({}) and pinning_wanted({PINNING_ENV: "1"})
    assert not pinning_wanted({PINNING_ENV: "off"})
    with pytest.raises(SettingError, match=f"^{PINNING_ENV}='maybe' is neither on nor off"):
        pinning_wanted({PINNING_ENV: "maybe"})


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-2", "lots"])
def test_a_memory_cap_option_is_a_finite_number_of_gb(value):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a number of GB above 0"):
        cli.memory_cap(value)
    assert cli.memory_cap("40") == 40.0


@pytest.mark.parametrize("script", ["run_script.py", "gpu_lease.py"])
def test_a_wrapper_says_a_wrong_variable_in_one_line(script, tmp_path):
    args = ["-m", "lmstudy", "aggregate", "--help"] if script == "run_script.py" else ["--", "true"]
    env = {"PATH": "/usr/bin:/bin", "LMSTUDY_DEVICE": "cpu", PINNING_ENV: "maybe", RUNTIME_ENV: "abc",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, f"scripts/{script}", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: LMSTUDY_"), done.stderr
