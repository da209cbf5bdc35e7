"""A model that misbehaves in a measuring process gets one sentence naming its factory and what it did
(lmstudy.measure.fresh_process), and what it starts ends with the job, named in its log.

Real jobs, run as the workflow runs them, on a tiny factory that does each
(tests/fixtures/models/misbehaving_lm.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lmstudy.measure.fresh_process import descendants

from .conftest import REPO
from .specs import spec_fields

FACTORY = "tests/fixtures/models/misbehaving_lm.py:build"
ONE_PROCESS = {"min_processes": 1, "max_processes": 1}


def _timing_job(how: str, tmp_path) -> subprocess.CompletedProcess:
    spec = spec_fields(
        "timing",
        model={"factory": FACTORY, "name": "bad", "range_depth": None, "extra": []},
        variant="naive",
        precision="fp32",
    )
    spec["noise"] = {**spec["noise"], **ONE_PROCESS}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lmstudy",
            "measure",
            "timing",
            "--spec",
            json.dumps(spec),
            "--out",
            str(tmp_path / "rows.csv"),
        ],
        cwd=REPO,
        env={**os.environ, "LMSTUDY_TEST_MISBEHAVE": how},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("fork", "forked a process in process 1 of the forward pass"),
        ("exit", "exited the process with status 3 (os._exit"),
        ("segv", "crashed with SIGSEGV"),
        ("meta", "on the meta device (embed.weight among them), where nothing is computed"),
    ],
)
def test_a_model_that_misbehaves_gets_one_sentence_naming_its_factory(how, said, tmp_path):
    done = _timing_job(how, tmp_path)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert FACTORY in errors[0] and said in errors[0], errors[0]
    assert not (tmp_path / "rows.csv").exists()
    if how == "fork":
        assert "misbehaving_lm.py:" in errors[0]  # where the model forked


def _sleepers() -> list[int]:
    return [pid for pid, command in descendants(1).items() if command == "sleep 313"]


def test_processes_the_model_starts_end_with_the_job_and_the_log_names_them(tmp_path):
    done = _timing_job("spawn", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    named = [line for line in done.stderr.splitlines() if "ended with it: " in line]
    # each measuring process (one per pass) left its sleep, ended and named
    assert len(named) == 3 and all("(sleep 313)" in line for line in named), done.stderr[-3000:]
    assert not _sleepers()


def test_the_resource_tracker_that_spawning_starts_is_ended_unnamed():
    """The distributed sections' ranks start with multiprocessing's spawn, which leaves its resource
    tracker running: the job ends it without naming it as the model's leftover (a daemon is named:
    test_processes_the_model_starts_end_with_the_job_and_the_log_names_them)."""
    program = (
        "import multiprocessing as mp, time\n"
        "from lmstudy.measure.fresh_process import descendants, end_left_processes\n"
        "if __name__ == '__main__':\n"
        "    rank = mp.get_context('spawn').Process(target=time.sleep, args=(0,))\n"
        "    rank.start(); rank.join()\n"
        "    assert any('resource_tracker' in c for c in descendants(__import__('os').getpid()).values())\n"
        "    end_left_processes('the job')\n"
        "    assert not descendants(__import__('os').getpid())\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "left" not in done.stderr, done.stderr


@pytest.mark.parametrize(("how", "said"), [("segv", "crashed with SIGSEGV"), ("exit", "with status 3")])
def test_a_model_that_crashes_the_profile_job_gets_one_sentence(how, said, tmp_path):
    """The nsys section's torch.profiler capture runs in a forked process too, so a model that crashes
    or exits there is named with its factory, no traceback (issue 37, item 4)."""
    spec = spec_fields("nsys", model={"factory": FACTORY, "name": "bad", "range_depth": None, "extra": []},
                       precision="fp32")
    spec["backend"] = "torch"
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy", "measure", "nsys", "--spec", json.dumps(spec),
         "--out-dir", str(tmp_path / "nsys")],
        cwd=REPO, env={**os.environ, "LMSTUDY_TEST_MISBEHAVE": how}, capture_output=True, text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert FACTORY in errors[0] and said in errors[0] and "the profiled process" in errors[0], errors[0]
    assert not list((tmp_path / "nsys").rglob("*.csv"))


def test_a_program_nsys_profiled_that_ends_without_its_record_names_the_users_model(monkeypatch):
    from lmstudy.errors import UserError
    from lmstudy.measure import fresh_process
    from lmstudy.measure.nsys.job import _program_failed

    assert isinstance(_program_failed(139), RuntimeError)  # the study's own program: its log says why
    monkeypatch.setattr(fresh_process, "MODEL_FACTORY", FACTORY)
    error = _program_failed(139)
    assert isinstance(error, UserError) and FACTORY in str(error) and "nsys exit 139" in str(error)


# The memory job's runner with its capture, which needs CUDA, replaced by one that does on the CPU what
# it does first on a GPU: build the user's model and run its pass.
_MEMORY_ON_THE_CPU = """
import sys
import torch
from lmstudy.entry import run
from lmstudy.measure.memory import capture as memory_capture
from lmstudy.measure.steps import make_step

def build_and_step(spec, snapshot_path, clock):
    work = spec.build_workload(torch.device("cpu"), with_optimizer=spec.pass_name == "train_step")
    make_step(work, spec.pass_name)()
    return {"status": "ok", "stage": "done", "max_memory_allocated": 0}

memory_capture.capture = build_and_step
sys.argv = ["lmstudy", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize(("how", "said"), [("segv", "crashed with SIGSEGV"), ("exit", "with status 3")])
def test_a_model_that_crashes_the_memory_job_gets_one_sentence(how, said, tmp_path):
    """The memory snapshot is captured in a forked process too, so a model that crashes or exits there
    is named with its factory, no traceback, and no snapshot is left (issue 37, item 4)."""
    spec = spec_fields("memory", model={"factory": FACTORY, "name": "bad", "range_depth": None, "extra": []},
                       precision="fp32", device="cpu")
    out = tmp_path / "snapshot.pickle"
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY_ON_THE_CPU, "measure", "memory", "--spec", json.dumps(spec),
         "--out", str(out)],
        cwd=REPO, env={**os.environ, "LMSTUDY_TEST_MISBEHAVE": how}, capture_output=True, text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert FACTORY in errors[0] and said in errors[0] and "the snapshot's process" in errors[0], errors[0]
    assert not list(tmp_path.iterdir())
