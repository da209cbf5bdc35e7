"""Jobs that die: a SIGKILL mid-measurement leaves no result, a failure names its log."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from .conftest import SNAKEMAKE, new_workdir, snakemake

TARGET = "results/default/timing/raw/tiny_ctx64_fp32_naive.csv"
LOG = "logs/default/timing/tiny_ctx64_fp32_naive.log"


def set_smoke(workdir: Path, **changes) -> None:
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    for key, value in changes.items():
        *parents, last = key.split(".")
        node = config["presets"]["smoke"]
        for name in parents:
            node = node[name]
        node[last] = value
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def wait_for(condition, what: str, timeout_s: float = 180):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {what}")


@pytest.mark.workflow  # it runs a measuring job, then kills it midway
def test_a_job_killed_mid_measurement_leaves_no_result_and_reruns(tmp_path):
    workdir = new_workdir(tmp_path / "run")
    # Snakemake, the job's shell and its Python (and any cold-start child) in
    # one new process group: killing the group is a node dying under the job.
    run = subprocess.Popen(
        [*SNAKEMAKE, "-d", str(workdir), "--cores", "1", TARGET, "--config", "preset=smoke"],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        # The job runs fresh processes per pass and logs each as it ends.
        # Once the first is done, the job is in the middle of its measurements.
        log = workdir / LOG
        wait_for(
            lambda: log.exists() and "forward, process 1: " in log.read_text(),
            "the job's first fresh process to finish",
        )
        os.killpg(run.pid, signal.SIGKILL)
    finally:
        output = run.communicate(timeout=60)[0]
    assert run.returncode == -signal.SIGKILL, output[-3000:]

    assert not (workdir / TARGET).exists(), "a killed job left a result behind"
    # what a killed run leaves: a stale lock (remove with --unlock) and the job
    # marked incomplete, which --rerun-incomplete (profiles/default) redoes
    snakemake(workdir, "--unlock", "--config", "preset=smoke")
    again = snakemake(workdir, "--cores", "1", TARGET, "--config", "preset=smoke")
    assert "1 of 1 steps (100%) done" in again.stdout + again.stderr
    table = pd.read_csv(workdir / TARGET)
    assert len(table) == 9 and set(table["status"]) == {"ok"}  # 3 passes x 3 warm-ups
    assert not list((workdir / TARGET).parent.glob(".*.tmp"))


@pytest.mark.workflow
def test_a_failed_job_names_its_log(tmp_path):
    workdir = new_workdir(tmp_path / "run")
    # passes the schema, fails in the job: this machine has no GPU
    set_smoke(workdir, device="cuda")
    done = snakemake(workdir, "--cores", "1", TARGET, "--config", "preset=smoke", check=False)
    assert done.returncode != 0
    errors = done.stdout + done.stderr
    block = re.search(r"Error in rule time_model:(.*?)(?:\n\n|Logfile )", errors, re.S)
    assert block, errors[-3000:]
    assert re.search(rf"^\s+log: {re.escape(LOG)}", block.group(1), re.M), block.group(1)
    # and that log holds the sentence that says what to fix, and nothing else: no traceback
    said = (workdir / LOG).read_text().strip().splitlines()
    assert len(said) == 1 and said[0].startswith("error: CUDA is not available on this machine"), said
    assert not (workdir / TARGET).exists()
