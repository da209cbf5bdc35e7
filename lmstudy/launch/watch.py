"""A job stops with its workflow, and at its time limit, saying where it was.

Snakemake kills a running job's process when it is cancelled, but not when
it is itself killed (kill -9, a closed terminal, an out-of-memory kill): the
shell it started, and the job under it, go on measuring unseen and may even
write outputs nobody trusts. And on a local run nothing enforces a job's
`runtime` resource (SLURM does on a cluster), so a job that hangs (a model
factory that blocks at import) hangs the study with an empty log.

So each job's wrapper (the GPU lease's, the job server's client) watches two
things the shell prefix of workflow/rules/common.smk hands it:
LMSTUDY_WORKFLOW_PID, the Snakemake process that started the job's shell,
and LMSTUDY_RUNTIME_MIN, the job's time limit. When the workflow is gone
the job is killed; past the limit the job is first asked to print every
thread's stack to its log (faulthandler on DUMP_SIGNAL, which lmstudy.cli
registers), then killed, with one sentence saying so. Without them (a script
run by hand) nothing is watched.

Stdlib-only: the wrappers import it before anything else.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time
from pathlib import Path

from lmstudy.job_process import DUMP_SIGNAL, RUNTIME_ENV, WORKFLOW_PID_ENV, env_number

POLL_S = 1.0
# How long a job has to write its stacks before it is killed.
DUMP_WAIT_S = 2.0
# A job stopped by its watch exits as if SIGTERM ended it (what Snakemake's cancel does).
STOPPED = 128 + signal.SIGTERM


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), None when there is none: with the pid,
    it names one process, never a later one that reuses the number."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class Watch:
    """What a job's wrapper watches (the module's docstring); `reason()` says when to stop it."""

    def __init__(self, environ=os.environ, started: float | None = None) -> None:
        try:
            pid = int(environ.get(WORKFLOW_PID_ENV) or 0)
        except ValueError:
            pid = 0
        self.workflow = (pid, process_start(pid)) if pid > 1 else None
        # 0 or unset: no time limit; anything else not minutes is said, not taken for no limit
        self.minutes = env_number(environ, RUNTIME_ENV, 0.0, "a job's time limit in minutes (0: none)")
        start = time.monotonic() if started is None else started
        self.deadline = start + self.minutes * 60 if self.minutes > 0 else None

    @property
    def active(self) -> bool:
        return self.workflow is not None or self.deadline is not None

    def workflow_gone(self) -> bool:
        if self.workflow is None:
            return False
        pid, started = self.workflow
        return started is None or process_start(pid) != started

    def overdue(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def reason(self) -> str | None:
        """One sentence for the log when the job must stop now, else None."""
        if self.workflow_gone():
            return (f"the workflow that started this job (Snakemake, pid {self.workflow[0]}) is gone, so the "
                    "job was stopped with it: run snakemake again to redo it.")
        if self.overdue():
            return (f"the job ran past its time limit of {self.minutes:g} minutes (its runtime resource) and "
                    "was stopped; the stacks above show where it was: if it hung there (a model factory "
                    "that blocks at import?), fix that, and if it needs longer, raise its runtime "
                    "(set-resources, or lmstudy_max_runtime in the workflow profile).")
        return None

    def stop(self, pid: int, reason: str, log=sys.stderr, group: bool = False) -> None:
        """Stop job `pid` (with `group`, its process group): its stacks first where it is overdue."""
        kill = os.killpg if group else os.kill
        if not self.workflow_gone():
            with contextlib.suppress(OSError):
                kill(pid, DUMP_SIGNAL)
            # The job's own work may be in a process it forked (a measuring or counting process, which
            # inherited the stack dump and the log): each says where it is too.
            for child in _descendants(pid):
                with contextlib.suppress(OSError):
                    os.kill(child, DUMP_SIGNAL)
            time.sleep(DUMP_WAIT_S)  # the dumps are written by the processes, at once; this is their margin
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)
        print(f"error: {reason}", file=log, flush=True)


def _descendants(pid: int) -> list[int]:
    """The processes below `pid` (its children, theirs, ...), from /proc; none where it cannot be read."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, frontier = [], [pid]
    while frontier:
        children = parents.get(frontier.pop(), [])
        found += children
        frontier += children
    return found


def wait_readable(fd: int, watch: Watch) -> str | None:
    """Wait until `fd` is readable (the job's end); the watch's reason where the job must stop first."""
    while True:
        readable, _, _ = select.select([fd], [], [], POLL_S if watch.active else None)
        if readable:
            return None
        reason = watch.reason()
        if reason:
            return reason


_PR_SET_PDEATHSIG = 1


def exec_watched(command: list[str], env: dict[str, str], job_fds: tuple[int, ...] = ()) -> None:
    """Exec `command` as this process, watched by a small child (the job's wrapper is gone once it
    execs): the child dies with the job, and stops the job when the watch says so. `job_fds`: the
    job's own descriptors (its lease), which the child closes."""
    watch = Watch(env)
    if watch.active:
        job = os.getpid()
        if os.fork() == 0:
            try:
                _watch_job(job, watch, job_fds)
            finally:
                os._exit(0)
    os.execvpe(command[0], command, env)


def _watch_job(job: int, watch: Watch, job_fds: tuple[int, ...]) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # Nothing of the job's but its log: its lease and pipes held open here would keep them busy.
    for fd in (0, 1, *job_fds):
        with contextlib.suppress(OSError):
            os.close(fd)
    while os.getppid() == job:
        reason = watch.reason()
        if reason:
            watch.stop(job, reason)
            return
        time.sleep(POLL_S)
