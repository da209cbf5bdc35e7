"""What a job's process shares with the launcher that started it (lmstudy.launch).

The launcher tells the job what it decided through environment variables
(the names below): the GPU it leased, how it chose it, how long the job
waited for it, the CPU cores it gave the job, and the lease's open file.
The job reads them as data, into its rows' provenance (lmstudy.environment)
and its phase record (lmstudy.phases), so that neither imports the launcher.
Also here, because both sides use them: when the job's process started
(where it is a fork of the job server), dying with a parent, and the
per-process scratch folder that the job server removes when it reaps a job.

Stdlib-only and importing nothing of lmstudy: it is the one module outside
lmstudy.launch that the launcher imports (tests/test_import_graph.py).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

# Set by lmstudy.launch.gpu_lease for the job it starts.
FD_ENV = "LMSTUDY_GPU_LEASE_FD"
INDEX_ENV = "LMSTUDY_GPU_INDEX"
UUID_ENV = "LMSTUDY_GPU_UUID"
SOURCE_ENV = "LMSTUDY_GPU_SOURCE"
WAITED_ENV = "LMSTUDY_GPU_WAITED_S"
LEASED_AT_ENV = "LMSTUDY_GPU_LEASED_AT"
FOREIGN_ENV = "LMSTUDY_GPU_FOREIGN"
CORES_ENV = "LMSTUDY_CPU_CORES"
# Set by the shell prefix of workflow/rules/common.smk and read by lmstudy.launch.watch: the Snakemake
# process that started the job's shell, and the job's time limit (its runtime resource, minutes).
WORKFLOW_PID_ENV = "LMSTUDY_WORKFLOW_PID"
RUNTIME_ENV = "LMSTUDY_RUNTIME_MIN"
class SettingError(ValueError):
    """An environment variable of ours holds a value we cannot take; the message is one sentence."""


SWITCH_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
                "off": False}


def env_switch(environ, name: str, default: bool = True) -> bool:
    """The on/off variable `name` (1/0, true/false, yes/no, on/off; unset or empty: `default`)."""
    value = environ.get(name, "").strip().lower()
    if not value:
        return default
    if value not in SWITCH_WORDS:
        raise SettingError(f"{name}={environ[name]!r} is neither on nor off: set it to 1 or 0 (or unset it).")
    return SWITCH_WORDS[value]


def env_number(environ, name: str, default: float, what: str, positive: bool = False) -> float:
    """The number in variable `name` (unset or empty: `default`): finite and not negative (with
    `positive`, above 0), else a SettingError that says `what` the number is."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 if positive else value >= 0) or value == float("inf"):
        bound = "above 0" if positive else "0 or more"
        raise SettingError(
            f"{name}={environ[name]!r} is not {what}: set it to a number {bound} (or unset it)."
        )
    return value


# What makes a job print every thread's stack to its log (faulthandler, registered by
# lmstudy.cli.run_main): its wrapper sends it before stopping a job at its time limit.
DUMP_SIGNAL = signal.SIGUSR2


def lease_facts(environ=os.environ) -> dict[str, str]:
    """The GPU lease as provenance columns (lmstudy.environment.describe)."""
    return {
        "gpu_index": environ.get(INDEX_ENV, ""),
        "gpu_uuid": environ.get(UUID_ENV, ""),
        "gpu_chosen_by": environ.get(SOURCE_ENV, "none"),
        "gpu_foreign_processes": environ.get(FOREIGN_ENV, ""),
    }


def lease_record(environ=os.environ) -> dict:
    """The GPU lease for a job's phase record (lmstudy.phases): where and when it measured."""
    def number(name: str) -> float | None:
        try:
            return float(environ[name])
        except (KeyError, ValueError):
            return None

    return {
        "host": socket.gethostname(),
        "gpu_index": environ.get(INDEX_ENV, ""),
        "gpu_uuid": environ.get(UUID_ENV, ""),
        "chosen_by": environ.get(SOURCE_ENV, "none"),
        "waited_s": number(WAITED_ENV) or 0.0,
        "leased_at": number(LEASED_AT_ENV),
        "cpu_cores": environ.get(CORES_ENV, ""),
        "foreign_processes": environ.get(FOREIGN_ENV, ""),
    }


def inherited_fds(environ=os.environ) -> tuple[int, ...]:
    """The lease's file descriptor, for a child the job starts (nsys) to hold it too."""
    try:
        fd = int(environ[FD_ENV])
        os.fstat(fd)
    except (KeyError, ValueError, OSError):
        return ()
    return (fd,)


# When the job began, where its process is a fork of lmstudy.launch.job_server
# (which sets it): the wall time at which the job's own wrapper process started.
PROCESS_STARTED_AT: float | None = None


def seconds_since_process_start() -> float:
    """Wall time since this job's process started (Linux), NaN where unknown.

    For a job forked by lmstudy.launch.job_server, since its wrapper process started.
    """
    if PROCESS_STARTED_AT is not None:
        return time.time() - PROCESS_STARTED_AT
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            return float(uptime.read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Be killed when `parent` dies; exit now if it is gone already."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died between fork and prctl: then nobody waits for us.
    if os.getppid() != parent:
        os._exit(1)


SCRATCH_PREFIX = "lmstudy-torch-"


def remove_scratch_of(pid: int, tmpdir: str | None = None) -> None:
    """Remove the scratch folders process `pid` made in `tmpdir` (default: this process's).

    For a process killed with SIGKILL, which runs no exit handler: the job
    server calls it for each job it reaps.
    """
    for folder in Path(tmpdir or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}{pid}-*"):
        shutil.rmtree(folder, ignore_errors=True)


def own_torch_scratch() -> str:
    """Give torch's own files a folder of this process's, removed when it exits; its path.

    Importing torch._dynamo (AdamW's constructor does) creates inductor's
    cache folder, <tmp>/torchinductor_<user>, and nothing ever removes it: a
    run would leave it behind in $TMPDIR. A TORCHINDUCTOR_CACHE_DIR set by the
    user is theirs and kept. Call before torch._dynamo is imported; child
    processes inherit the folder.
    """
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        return os.environ["TORCHINDUCTOR_CACHE_DIR"]
    # Named by the process, so that whoever reaps it after a SIGKILL finds it (remove_scratch_of).
    folder = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(folder, "triton"))
    owner = os.getpid()

    def remove() -> None:
        # Only by the process that made it: a job forked from the job server
        # runs the server's exit handlers too, and the server still needs it.
        if os.getpid() == owner:
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(remove)
    return folder
