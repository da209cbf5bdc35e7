"""Run a function in a fresh process forked from this one, and get its result back.

A cold start is CUDA initialisation, the model build and the first steps;
the interpreter's start and `import torch` are not part of it and cost
seconds per process. A child forked from a parent that has imported torch
but never touched CUDA starts with the imports done and initialises CUDA
itself, exactly as a new process would. The parent must therefore never
initialise CUDA (not even torch.cuda.is_available(), which starts the driver).

The child sends its result as JSON through a pipe: a plain-data result, no
pickles. It dies with its parent (PR_SET_PDEATHSIG), so killing a job never
leaves a measurement running on the GPU that would overlap the next one.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable

from lmstudy.errors import UserError
from lmstudy.job_process import die_with_parent


class ChildFailed(RuntimeError):
    """The fresh process raised, or died without a result."""


def run_forked(function: Callable[..., dict], *args, what: str = "the fresh process") -> dict:
    """`function(*args)` in a forked child; its dict result, with `fork_s` added.

    `fork_s` is the time from the fork to the child's first instruction.
    Raises ChildFailed, naming `what`, when the child raises or dies; a
    UserError in the child is raised again here, as the same sentence.
    """
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    forked_at = time.perf_counter()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        started = time.perf_counter()
        status = 1
        try:
            os.close(read_end)
            die_with_parent(parent)
            try:
                result = {"ok": True, "value": function(*args), "fork_s": started - forked_at}
                status = 0
            except UserError as error:
                # The user's to fix (no CUDA for a GPU run, ...): one sentence, no traceback.
                result = {"ok": False, "user_error": str(error)}
            except BaseException:  # noqa: BLE001 - reported to the parent, whatever it was
                result = {"ok": False, "error": traceback.format_exc()}
            with os.fdopen(write_end, "w") as pipe:
                json.dump(result, pipe, default=str)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            # No atexit handlers, no parent's buffers flushed twice.
            os._exit(status)
    os.close(write_end)
    try:
        with os.fdopen(read_end) as pipe:
            payload = pipe.read()
    finally:
        _, wait_status = os.waitpid(pid, 0)
    try:
        result = json.loads(payload)
    except json.JSONDecodeError:
        # Nothing, or a result cut short: the child died while sending it.
        raise ChildFailed(f"{what} died without a result ({_describe(wait_status)})") from None
    if "user_error" in result:
        raise UserError(result["user_error"])
    if not result["ok"]:
        raise ChildFailed(f"{what} failed:\n{result['error']}")
    value = result["value"]
    value["fork_s"] = result["fork_s"]
    return value


def _describe(wait_status: int) -> str:
    if os.WIFSIGNALED(wait_status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
    return f"exit {os.WEXITSTATUS(wait_status)}"
