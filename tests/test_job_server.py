"""GPU jobs start as forks of a server that imported torch (lmstudy.launch.job_server), through the
lease's wrapper, as the workflow runs them: a real server, real sockets, real processes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmstudy.launch import job_server

from .conftest import REPO

LEASE = [sys.executable, str(REPO / "scripts" / "gpu_lease.py"), "--"]

# A job that reports what it was given and how its time went, and exits as told.
JOB = """
import json, os, sys
from lmstudy.launch import gpu_lease
from lmstudy.phases import PhaseClock
clock = PhaseClock()
print(json.dumps({{
    "argv": sys.argv, "cwd": os.getcwd(), "pid": os.getpid(), "parent": os.getppid(),
    "variable": os.environ.get("JOB_VARIABLE"), "stdin": sys.stdin.read() if sys.argv[1] != "sleep" else "",
    "phases": dict(clock.seconds), "holds_lease": gpu_lease.holds_lease(),
    "torch_before_script": {torch_loaded}, "pandas_before_script": {pandas_loaded},
}}))
print("to stderr", file=sys.stderr)
how = sys.argv[1]
if how == "raise":
    raise RuntimeError("the job failed")
if how == "message":
    sys.exit("a message for the user")
if how == "sleep":
    from lmstudy.cli import own_torch_scratch
    own_torch_scratch()  # as every script's run_main does: a folder in $TMPDIR, its exit removes it
    open(sys.argv[2], "w").write(str(os.getpid()))
    sys.stdin.read()
sys.exit(int(how))
"""


@pytest.fixture
def job(tmp_path) -> Path:
    script = tmp_path / "job.py"
    script.write_text(JOB.format(repo=str(REPO), torch_loaded='"torch" in sys.modules',
                                 pandas_loaded='"pandas" in sys.modules'))
    return script


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # Not this test session's torch scratch folder (tests/conftest.py): jobs make their own.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LMSTUDY_", "SLURM_", "TORCHINDUCTOR_", "TRITON_"))}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    path = os.pathsep.join(
        d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvidia-smi").exists()
    )
    return {**env, "PATH": path, "LMSTUDY_DEVICE": "cpu", "LMSTUDY_JOB_SERVER_DIR": str(tmp_path / "servers"),
            "LMSTUDY_JOB_SERVER_IDLE_S": "20", **extra}


def run_job(script: Path, env: dict, *args: str, stdin: str = "") -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([*LEASE, sys.executable, str(script), *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=300, cwd=script.parent)
    report = json.loads(done.stdout.splitlines()[0]) if done.stdout.strip() else {}
    return done, report


def test_jobs_are_forks_of_one_server_that_imported_torch(tmp_path, job):
    env = server_env(tmp_path, JOB_VARIABLE="first")
    first, seen = run_job(job, env, "3", stdin="input line")
    assert first.returncode == 3, first.stderr
    assert "to stderr" in first.stderr and len(list((tmp_path / "servers").glob("*.sock"))) == 1
    assert seen["argv"] == [str(job), "3"] and seen["cwd"] == str(tmp_path)
    assert seen["variable"] == "first" and seen["stdin"] == "input line"
    # The job is not the wrapper's own process: it was forked with torch imported.
    assert seen["torch_before_script"] is True

    second, again = run_job(job, env, "0")
    assert second.returncode == 0 and len(list((tmp_path / "servers").glob("*.sock"))) == 1
    assert again["parent"] == seen["parent"], "the second job was not forked by the same server"
    assert again["pid"] != seen["pid"]
    # The imports were the server's: the second job's imports phase is its own few.
    assert again["phases"]["imports"] < 1.0 < seen["phases"]["imports"]


def test_a_job_fails_through_the_server_as_it_would_alone(tmp_path, job):
    env = server_env(tmp_path)
    raised, _ = run_job(job, env, "raise")
    assert raised.returncode == 1 and "RuntimeError: the job failed" in raised.stderr
    message, _ = run_job(job, env, "message")
    assert message.returncode == 1 and "a message for the user" in message.stderr
    alone, _ = run_job(job, {**env, "LMSTUDY_JOB_SERVER": "0"}, "message")
    assert (alone.returncode, alone.stderr.strip().splitlines()[-1]) == (
        message.returncode, message.stderr.strip().splitlines()[-1])


def test_another_environment_gets_a_server_of_its_own(tmp_path, job):
    _, first = run_job(job, server_env(tmp_path, JOB_VARIABLE="a"), "0")
    _, same = run_job(job, server_env(tmp_path, JOB_VARIABLE="a", LMSTUDY_GPU_INDEX="7"), "0")
    _, other = run_job(job, server_env(tmp_path, JOB_VARIABLE="b"), "0")
    assert first["parent"] == same["parent"] != other["parent"]
    assert job_server.server_key({"A": "1"}) != job_server.server_key({"A": "2"})
    assert job_server.server_key({"A": "1", "CUDA_VISIBLE_DEVICES": "3"}) == job_server.server_key({"A": "1"})


def test_the_job_holds_the_gpu_lease_of_its_wrapper(tmp_path, job):
    env = server_env(tmp_path, LMSTUDY_GPUS="0", LMSTUDY_GPU_LEASE_DIR=str(tmp_path / "leases"))
    done, seen = run_job(job, env, "0")
    assert done.returncode == 0, done.stderr
    assert "gpu lease: GPU 0" in done.stderr
    assert seen["parent"] != seen["pid"] and seen["holds_lease"] is True
    # The wrapper waited for nothing; its job's phase record starts at the wrapper's start.
    assert seen["phases"]["wait"] < 5


def test_killing_the_wrapper_kills_the_job_and_its_scratch_folder_goes(tmp_path, job):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = server_env(tmp_path, TMPDIR=str(scratch))
    marker = tmp_path / "job.pid"
    wrapper = subprocess.Popen([*LEASE, sys.executable, str(job), "sleep", str(marker)], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline and wrapper.poll() is None, "the job never started"
        time.sleep(0.05)
    pid = int(marker.read_text())
    assert pid != wrapper.pid
    assert list(scratch.glob(f"lmstudy-torch-{pid}-*"))  # the job's, made where its $TMPDIR says
    wrapper.send_signal(signal.SIGKILL)
    wrapper.wait(timeout=30)
    while _alive(pid):
        assert time.monotonic() < deadline, "the job outlived its wrapper"
        time.sleep(0.05)
    # Killed with SIGKILL, the job ran no exit handler: the server that reaped it removed its folder.
    while list(scratch.glob(f"lmstudy-torch-{pid}-*")):
        assert time.monotonic() < deadline, "the killed job's scratch folder stayed"
        time.sleep(0.05)


def test_an_idle_server_exits_and_leaves_nothing_behind(tmp_path, job):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = server_env(tmp_path, LMSTUDY_JOB_SERVER_IDLE_S="1", TMPDIR=str(scratch))
    _, seen = run_job(job, env, "0")
    server = seen["parent"]
    assert (tmp_path / "servers").is_dir()
    deadline = time.monotonic() + 60
    while _alive(server) or list((tmp_path / "servers").glob("*.sock")):
        assert time.monotonic() < deadline, "the idle server did not exit"
        time.sleep(0.1)
    # Its socket, lock and log, the folder, and torch's scratch files in $TMPDIR (the preload's
    # torch._dynamo would make torchinductor_<user> there): all gone.
    assert not (tmp_path / "servers").exists()
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("variable", [{"LMSTUDY_JOB_SERVER": "0"}, {"SLURM_JOB_ID": "12"}])
def test_without_the_server_the_job_is_the_wrappers_own_process(tmp_path, job, variable):
    _, seen = run_job(job, server_env(tmp_path, **variable), "0")
    assert seen["torch_before_script"] is False
    assert not (tmp_path / "servers").exists() or not list((tmp_path / "servers").glob("*.sock"))


def test_the_analysing_side_runs_as_forks_of_a_server_that_never_imports_torch(tmp_path, job):
    env = server_env(tmp_path, JOB_VARIABLE="cpu side")
    seen = []
    for how in ("0", "4"):
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "run_script.py"), str(job), how],
                              env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == int(how), done.stderr
        seen.append(json.loads(done.stdout.splitlines()[0]))
    assert seen[0]["parent"] == seen[1]["parent"] and seen[0]["pid"] != seen[1]["pid"]
    assert all(s["pandas_before_script"] and not s["torch_before_script"] for s in seen)
    assert seen[0]["variable"] == "cpu side" and seen[0]["argv"] == [str(job), "0"]


def test_only_this_python_running_a_script_goes_to_the_server():
    assert job_server.wanted([sys.executable, "scripts/aggregate.py"], {})
    assert job_server.wanted([sys.executable, "-m", "lmstudy", "measure", "timing"], {})
    assert not job_server.wanted([sys.executable, "-c", "print(1)"], {})
    assert not job_server.wanted([sys.executable, "-c", "pass"], {})
    assert not job_server.wanted(["nsys", "profile", sys.executable, "x.py"], {})
    assert not job_server.wanted([sys.executable, "x.py"], {"LMSTUDY_JOB_SERVER": "0"})
    # A program named as the shell finds it on PATH.
    assert job_server.wanted([Path(sys.executable).name, "x.py"], {}) == (
        shutil.which(Path(sys.executable).name) is not None
        and os.path.realpath(shutil.which(Path(sys.executable).name)) == os.path.realpath(sys.executable))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# Issue 23, item 11: a server that cannot be had never fails or hangs the job.
def test_a_socket_path_that_is_a_folder_runs_the_job_without_the_server(tmp_path, job):
    env = server_env(tmp_path)
    servers = tmp_path / "servers"
    servers.mkdir(mode=0o700)
    key = job_server.server_key(job_server.server_environment({**env, "LMSTUDY_DEVICE": "cpu"}))
    (servers / f"{key}.sock").mkdir()
    (servers / f"{key}.lock").mkdir()
    done, seen = run_job(job, env, "0")
    assert done.returncode == 0, done.stderr
    assert "job server: the job server cannot be reached" in done.stderr
    assert "IsADirectoryError" not in done.stderr
    assert seen["torch_before_script"] is False  # it ran as a process of its own


def test_a_stopped_server_times_out_says_so_and_the_job_runs_alone(tmp_path, job):
    env = server_env(tmp_path, LMSTUDY_JOB_SERVER_TIMEOUT_S="3")
    _, seen = run_job(job, env, "0")
    server = seen["parent"]
    # Stop the server, never this test: the first job must have been its fork.
    assert seen["torch_before_script"] is True and server not in (os.getpid(), os.getppid())
    os.kill(server, signal.SIGSTOP)
    try:
        done, alone = run_job(job, env, "0")
        assert done.returncode == 0, done.stderr
        assert "the job server did not answer within 3 s" in done.stderr
        assert alone["torch_before_script"] is False and alone["parent"] != server
    finally:
        os.kill(server, signal.SIGCONT)


# Issue 40: a server does not linger DEFAULT_IDLE_S after the Snakemake runs it served have ended.
def test_a_server_exits_when_the_workflows_it_served_have_ended(tmp_path, job):
    workflow = subprocess.Popen(["sleep", "600"])  # stands for the Snakemake process of a run
    env = server_env(tmp_path, LMSTUDY_JOB_SERVER_IDLE_S="600", LMSTUDY_WORKFLOW_PID=str(workflow.pid))
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "run_script.py"), str(job), "0"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    server = json.loads(done.stdout.splitlines()[0])["parent"]
    assert _alive(server)  # idle, its run still going
    workflow.kill()
    workflow.wait()
    deadline = time.monotonic() + 60  # far below the idle time of 600 s
    while _alive(server):
        assert time.monotonic() < deadline, "the server outlived the run it served"
        time.sleep(0.1)
