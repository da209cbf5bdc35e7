"""The process that forks the measuring ones never runs the user's model code, and never forks once CUDA
has started in it (lmstudy.measure.fresh_process, lmstudy.measure.model_facts).

A factory that writes down the process of every import and every call
(tests/fixtures/models/pid_recording_lm.py) is measured by the timing,
torch.compile and ladder jobs' scripts, run as the workflow runs them: its
records must all come from the job's children, none from the job's process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from lmstudy.errors import UserError
from lmstudy.measure import fresh_process
from lmstudy.measure.factory import load_factory

from .conftest import REPO
from .specs import spec_fields

FACTORY = "tests/fixtures/models/pid_recording_lm.py:build"
MODEL = {"factory": FACTORY, "name": "pid-recorder", "range_depth": None, "extra": []}
JOBS = {
    "timing": ({"variant": "sdpa", "precision": "bf16"}, ()),
    "compile": ({"attention": "sdpa"}, ()),
    "ladder": ({"rung": "bf16"}, ("--matmul-out", "matmul.csv")),
}
ONE_PROCESS = {"min_processes": 1, "max_processes": 1, "max_spread": 0.05, "min_gpu_busy": 0.85}


def _run_job(job: str, tmp_path, extra_env=None) -> tuple[int, list[tuple[str, int]], pd.DataFrame]:
    overrides, extra_args = JOBS[job]
    spec = spec_fields(job, model=MODEL, **overrides)
    if "noise" in spec:
        spec["noise"] = ONE_PROCESS
    record = tmp_path / f"{job}.pids"
    env = {**os.environ, "LMSTUDY_TEST_PID_FILE": str(record), **(extra_env or {})}
    process = subprocess.Popen(
        [sys.executable, "-m", "lmstudy", "measure", job, "--spec", json.dumps(spec),
         "--out", str(tmp_path / "rows.csv"), *extra_args],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output[-4000:]
    events = [(line.split()[0], int(line.split()[1])) for line in record.read_text().splitlines()]
    return process.pid, events, pd.read_csv(tmp_path / "rows.csv")


@pytest.mark.parametrize("job", list(JOBS))
def test_the_users_factory_runs_only_in_the_jobs_children(job, tmp_path):
    job_pid, events, rows = _run_job(job, tmp_path)
    assert {"import", "call"} <= {event for event, _ in events}, events
    assert job_pid not in {pid for _, pid in events}, (
        f"the {job} job's own process (pid {job_pid}) imported or called the user's factory: {events}")
    assert (rows["status"] == "ok").all(), rows[["status"]].to_string()


def test_a_factory_that_touches_cuda_at_import_is_measured_as_any_other(tmp_path):
    """Only children import it: on a CPU nothing changes, and on a GPU its CUDA dies with the child."""
    job_pid, events, rows = _run_job("timing", tmp_path, {"LMSTUDY_TEST_TOUCH_CUDA": "1"})
    assert job_pid not in {pid for _, pid in events}
    assert (rows["status"] == "ok").all()
    assert rows["params"].iloc[0] > 0 and rows["flops_per_step"].notna().all()


def test_a_process_that_forks_measuring_processes_refuses_to_import_a_factory(monkeypatch):
    monkeypatch.setattr(fresh_process, "_FORKING_PARENT", True)
    with pytest.raises(RuntimeError, match="only its children may run the user's code"):
        load_factory.__wrapped__(FACTORY)


def _import_the_factory() -> dict:
    # In the child: not a forking parent, so the user's code may run here.
    return {"forking_parent": fresh_process.forks_measuring_processes(),
            "factory": load_factory.__wrapped__(FACTORY).__name__}


def test_a_forked_child_may_run_the_users_code(monkeypatch, tmp_path):
    monkeypatch.setattr(fresh_process, "_FORKING_PARENT", True)
    monkeypatch.setenv("LMSTUDY_TEST_PID_FILE", str(tmp_path / "pids"))
    result = fresh_process.run_forked(_import_the_factory)
    assert result["forking_parent"] is False and result["factory"] == "build"
    assert fresh_process.forks_measuring_processes()  # still the parent here


def test_a_parent_without_cuda_passes_the_check():
    assert fresh_process.cuda_started() is None
    fresh_process.check_cuda_untouched("the forward process")


def test_the_refusal_is_one_sentence_naming_what_started_cuda(monkeypatch):
    """The sentence itself; on a GPU, tools/check_fork_guard.py starts CUDA for real."""
    monkeypatch.setattr(fresh_process, "cuda_started", lambda: "torch has initialised CUDA")
    monkeypatch.setattr(fresh_process, "_FIRST_CUDA_CALL",
                        ["torch's CUDA initialisation, called from my_model.py:3 (<module>)"])
    with pytest.raises(UserError) as refused:
        fresh_process.run_forked(_import_the_factory, what="process 1 of the forward pass")
    sentence = str(refused.value)
    assert "\n" not in sentence and sentence.count(": ") >= 1
    assert "cannot start process 1 of the forward pass: torch has initialised CUDA" in sentence
    assert "my_model.py:3" in sentence


PROBE = """
import ctypes, json, sys
from lmstudy.measure import fresh_process
before = fresh_process.cuda_started()  # nothing loaded: untouched
driver = ctypes.CDLL(sys.argv[1])  # loaded, as torch's first CUDA call loads it, not initialised
loaded = fresh_process.cuda_started()
driver.cuInit(0)
started = fresh_process.cuda_started()
try:
    fresh_process.run_forked(dict, what="the forward process")
    refused = None
except fresh_process.CudaStartedInParent as error:
    refused = str(error)
print(json.dumps([before, loaded, started, refused]))
"""


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler to build the stand-in driver")
def test_the_driver_probe_sees_cuinit_where_torch_cannot(tmp_path):
    """A driver library loaded but not initialised passes; after cuInit (called past torch, as a user's
    library may) the fork is refused. The stand-in exports the driver's two calls the probe makes."""
    library = tmp_path / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library),
                    str(REPO / "tests/fixtures/fake_driver/libcuda.c")], check=True)
    done = subprocess.run([sys.executable, "-c", PROBE, str(library)], capture_output=True, text=True,
                          cwd=REPO, check=True)
    before, loaded, started, refused = json.loads(done.stdout.strip().splitlines()[-1])
    assert before is None and loaded is None
    assert started == "the CUDA driver has been initialised (cuInit)"
    assert refused.startswith("cannot start the forward process: the CUDA driver has been initialised")
