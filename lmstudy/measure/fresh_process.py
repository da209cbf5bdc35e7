"""Run a function in a fresh process forked from this one, and get its result back.

The one way the project starts a measuring process (timing, attention,
torch.compile, the ladder, and the counting child of lmstudy.measure.model_facts).

A cold start is CUDA initialisation, the model build and the first steps;
the interpreter's start and `import torch` are not part of it and cost
seconds per process. A child forked from a parent that has imported torch
but never touched CUDA starts with the imports done and initialises CUDA
itself, exactly as a new process would. The parent must therefore never
initialise CUDA (not even torch.cuda.is_available(), which starts the driver),
and so it never runs the user's model code or transformers, which may: a
process that forks measuring processes is marked (`mark_forking_parent`),
and lmstudy.measure.factory refuses to import a factory there. Before each
fork, `cuda_started` asks torch and the driver itself whether CUDA was
started, and the fork is refused with one sentence where it was: a forked
child could not use CUDA (docs/measuring.md gives the start methods measured).

The child sends its result as JSON through a pipe: a plain-data result, no
pickles. It dies with its parent (PR_SET_PDEATHSIG), so killing a job never
leaves a measurement running on the GPU that would overlap the next one.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import NoReturn

from lmstudy.errors import UserError
from lmstudy.job_process import die_with_parent


class ChildFailed(RuntimeError):
    """The fresh process raised, or died without a result."""


class CudaStartedInParent(UserError):
    """The process that forks measuring processes started CUDA: no forked child could use it."""


# Whether this process forks measuring processes (and so must not run the user's model code).
_FORKING_PARENT = False
# Where CUDA was first started in this process, where a watched entry point saw it (watch_cuda_start).
_FIRST_CUDA_CALL: list[str] = []
CUDA_SUCCESS = 0
# The torch entry points watched, with their originals: a measuring process puts them back.
_WATCHED: list[tuple[object, str, object]] = []
# The user's model factory of this job (lmstudy.command sets it; children inherit it): a measuring
# process that the model ends, crashes or forks is told in one sentence naming it.
MODEL_FACTORY: str | None = None
# Where the model's code forked in this measuring process (os.fork, multiprocessing's fork), and
# whether the fork under way is one: its child exits at once, before it runs anything of the model's.
_MODEL_FORKS: list[str] = []
_REFUSE_FORK = [False]
_FORKING_NOW = [False]  # run_forked's own fork
FORKED_BY_MODEL = 86  # the exit status of such a child


def mark_forking_parent() -> None:
    """This process forks measuring processes: CUDA must stay untouched and the user's code out of it.

    Availability checks made here go through NVML, which leaves the driver
    untouched; the entry points that start CUDA are watched, so that a
    refused fork can say what started it.
    """
    global _FORKING_PARENT
    _FORKING_PARENT = True
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    watch_cuda_start()


def become_measuring_process() -> None:
    """This process measures (nothing forks after it): the user's code may run here, and torch's CUDA
    entry points are torch's own again (no watcher frame in a timed step, nothing for dynamo to trace)."""
    global _FORKING_PARENT
    _FORKING_PARENT = False
    while _WATCHED:
        owner, name, original = _WATCHED.pop()
        setattr(owner, name, original)


def forks_measuring_processes() -> bool:
    """Whether this process is marked as one that forks measuring processes (never true in a child)."""
    return _FORKING_PARENT


def watch_cuda_start() -> None:
    """Record the caller of torch's CUDA entry points (initialisation, device count) the first time.

    Best effort: code that reaches the driver another way (ctypes, a
    library's own CUDA) is still caught by the driver probe of
    `cuda_started`, without a name.
    """
    torch = sys.modules.get("torch")
    if torch is None or _WATCHED:  # not imported yet, or watched already
        return

    def watched(owner, name: str, label: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        def wrapper(*args, **kwargs):
            if not _FIRST_CUDA_CALL:
                _FIRST_CUDA_CALL.append(f"{label}, called from {_caller_outside_torch()}")
            return original(*args, **kwargs)

        _WATCHED.append((owner, name, original))
        setattr(owner, name, wrapper)

    watched(torch.cuda, "_lazy_init", "torch's CUDA initialisation")
    watched(torch._C, "_cuda_getDeviceCount", "a CUDA device count (torch.cuda.is_available or device_count)")
    watched(torch._C, "_cuda_init", "torch's CUDA initialisation")


def _before_fork() -> None:
    _REFUSE_FORK[0] = False
    if _FORKING_PARENT or _FORKING_NOW[0] or MODEL_FACTORY is None:
        return
    where = _forked_by()
    if where is not None:
        _MODEL_FORKS.append(where)
        _REFUSE_FORK[0] = True


def _after_fork_in_child() -> None:
    if _REFUSE_FORK[0]:
        os._exit(FORKED_BY_MODEL)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _forked_by() -> str | None:
    """Where the model's code called for the fork under way, or None where torch or lmstudy did (a
    compile worker, a fresh process): the innermost caller past os and multiprocessing."""
    torch = sys.modules.get("torch")
    ours = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep]
    if torch is not None and getattr(torch, "__file__", None):
        ours.append(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    passed = [os.path.dirname(os.__file__) + os.sep + "multiprocessing" + os.sep, os.__file__]
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename != __file__ and not any(filename.startswith(p) for p in passed):
            if any(filename.startswith(folder) for folder in ours):
                return None
            return f"{filename}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return None


def first_cuda_call() -> str | None:
    """What started CUDA in this process, where a watched entry point saw it (watch_cuda_start)."""
    return _FIRST_CUDA_CALL[0] if _FIRST_CUDA_CALL else None


def _caller_outside_torch() -> str:
    try:
        frame = sys._getframe(2)
    except ValueError:  # called from the bottom of the stack
        return "an unknown place"
    while frame is not None:
        filename = frame.f_code.co_filename
        if f"{os.sep}torch{os.sep}" not in filename and filename != __file__:
            return f"{filename}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "an unknown place"


def cuda_started() -> str | None:
    """How CUDA was started in this process, or None where it is untouched.

    Asks torch (its lazy initialisation) and the driver itself: where
    libcuda is loaded, a driver call that needs cuInit succeeds only once
    something initialised it ("not initialised" before; a stub library or a
    failed cuInit answers other errors, and leaves a child free to start
    CUDA itself). Loading libcuda here would not start it (RTLD_NOLOAD only
    finds a library already loaded).
    """
    torch = sys.modules.get("torch")
    if torch is not None and (torch.cuda.is_initialized() or torch.cuda._is_in_bad_fork()):
        return "torch has initialised CUDA"
    if _driver_initialised():
        return "the CUDA driver has been initialised (cuInit)"
    return None


def _driver_initialised() -> bool:
    loaded = _loaded_libcuda()
    # A library replaced on disk shows as "... (deleted)": its soname still finds the loaded one.
    for name in ([*loaded, "libcuda.so.1"] if loaded else []):
        try:
            libcuda = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if libcuda.cuDeviceGetCount(ctypes.byref(count)) == CUDA_SUCCESS:
            return True
    return False


def _loaded_libcuda() -> list[str]:
    """Paths of the CUDA driver library mapped into this process (none until something loads it)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[5].strip() for line in maps if "libcuda.so" in line}
    except (OSError, IndexError):
        return []
    return sorted(p for p in paths if os.path.basename(p).startswith("libcuda.so"))


def check_cuda_untouched(what: str) -> None:
    """Refuse to fork `what` where this process started CUDA: one sentence, naming what started it."""
    how = cuda_started()
    if how is None:
        return
    first = f" (first: {_FIRST_CUDA_CALL[0]})" if _FIRST_CUDA_CALL else ""
    raise CudaStartedInParent(
        f"cannot start {what}: {how} in the process that forks the measuring processes{first}, and a "
        "forked child cannot use CUDA then; that process must leave CUDA to its children (nothing was "
        "measured; if the call above is lmstudy's own, report it as a bug)."
    )


def run_forked(
    function: Callable[..., dict], *args, what: str = "the fresh process", with_fork_time: bool = True
) -> dict:
    """`function(*args)` in a forked child; its dict result, with `fork_s` added (`with_fork_time`).

    `fork_s` is the time from the fork to the child's first instruction.
    Raises ChildFailed, naming `what`, when the child raises or dies; a
    UserError in the child is raised again here, as the same sentence.
    Refuses (CudaStartedInParent) where this process has started CUDA.
    """
    check_cuda_untouched(what)
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    forked_at = time.perf_counter()
    parent = os.getpid()
    _FORKING_NOW[0] = True
    try:
        pid = os.fork()
    finally:
        _FORKING_NOW[0] = False
    if pid == 0:  # the child: never returns (_run_child ends it with os._exit)
        started = time.perf_counter()
        _run_child(function, args, what, read_end, write_end, parent, fork_s=started - forked_at)
    os.close(write_end)
    result = _child_result(pid, read_end, what)
    value = result["value"]
    if with_fork_time:
        value["fork_s"] = result["fork_s"]
    return value


def _run_child(function: Callable[..., dict], args: tuple, what: str, read_end: int, write_end: int,
               parent: int, fork_s: float) -> NoReturn:
    """The forked child's whole life: run `function(*args)`, send its result to the parent as JSON
    through the pipe, and exit with os._exit, whatever happened.

    It never returns: a child that returned would run on in its caller's
    code, a second copy of the parent. os._exit runs no atexit handlers and
    flushes none of the buffers inherited from the parent (which would be
    written twice). A model that forked here (_MODEL_FORKS, caught by the
    fork hooks) turns any result into one sentence naming it; whatever the
    model started and orphaned is ended before the result is sent.
    """
    status = 1
    try:  # from the first call on: nothing the child does may return into the caller
        become_measuring_process()
        _MODEL_FORKS.clear()
        os.close(read_end)
        die_with_parent(parent)
        become_subreaper()  # what the model starts and orphans stays below: ended at the end
        try:
            result = {"ok": True, "value": function(*args), "fork_s": fork_s}
            status = 0
        except UserError as error:
            # The user's to fix (no CUDA for a GPU run, ...): one sentence, no traceback.
            result = {"ok": False, "user_error": str(error)}
        except SystemExit as error:
            result = ({"ok": False, "error": traceback.format_exc()} if MODEL_FACTORY is None else
                      {"ok": False, "user_error": _model_ended(what, f"called sys.exit({error.code!r})")})
        except BaseException:  # noqa: BLE001 - reported to the parent, whatever it was
            result = {"ok": False, "error": traceback.format_exc()}
        if _MODEL_FORKS:
            result = {"ok": False, "user_error": _model_forked(what)}
            status = 1
        end_left_processes(what)
        with os.fdopen(write_end, "w") as pipe:
            json.dump(result, pipe, default=str)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        # No atexit handlers, no parent's buffers flushed twice.
        os._exit(status)


def _child_result(pid: int, read_end: int, what: str) -> dict:
    """The parent's side: read the child's JSON result to the end of the pipe, reap the child (even
    when reading fails), and return a successful result; raise for any other.

    A UserError sent by the child is raised again as the same sentence; a
    child that failed or died without a whole result is a ChildFailed naming
    `what` (a UserError naming the model where the user's model ran there).
    """
    try:
        with os.fdopen(read_end) as pipe:
            payload = pipe.read()
    finally:
        _, wait_status = os.waitpid(pid, 0)
    try:
        result = json.loads(payload)
    except json.JSONDecodeError:
        # Nothing, or a result cut short: the child died while sending it.
        if MODEL_FACTORY is not None:  # the user's model ran there: one sentence naming it
            raise UserError(_model_ended(what, _died(wait_status))) from None
        raise ChildFailed(f"{what} died without a result ({_describe(wait_status)})") from None
    if "user_error" in result:
        raise UserError(result["user_error"])
    if not result["ok"]:
        raise ChildFailed(f"{what} failed:\n{result['error']}")
    return result


def _model_ended(what: str, how: str) -> str:
    return (f"the model of factory {MODEL_FACTORY!r} {how} in {what}, which ended without a result: a "
            "model must return its logits and leave the process to the study (nothing of this job was "
            "written; fix the model, or measure it without the part that does this).")


def _died(wait_status: int) -> str:
    if os.WIFSIGNALED(wait_status):
        signal_name = signal.Signals(os.WTERMSIG(wait_status)).name
        if os.WTERMSIG(wait_status) == signal.SIGSEGV:
            return "crashed with SIGSEGV (a segmentation fault in native code it ran)"
        if os.WTERMSIG(wait_status) == signal.SIGKILL:
            return "was killed by SIGKILL (the host's out-of-memory killer, or a person)"
        return f"was killed by signal {signal_name}"
    return f"exited the process with status {os.WEXITSTATUS(wait_status)} (os._exit, or a library that exits)"


def _model_forked(what: str) -> str:
    return (f"the model of factory {MODEL_FACTORY!r} forked a process in {what} (os.fork, called from "
            f"{_MODEL_FORKS[0]}): a forked process cannot use CUDA once it has started, so the study "
            "ended that process at once and measured nothing; compute in the model's own process (no "
            "os.fork, and multiprocessing only with the spawn start method).")


def end_left_processes(what: str) -> None:
    """End the processes this one started that still run (the model's, or a library's): a job leaves
    nothing behind. Each is named in the job's log."""
    left = descendants(os.getpid())
    if not left:
        return
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in left:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
    # torch.compile's own workers (inductor's pool) and the resource tracker that multiprocessing's
    # spawn starts (the distributed sections' ranks) are ended too, unnamed: they are no one's leak.
    named = {pid: command for pid, command in left.items()
             if not any(mark in command for mark in LIBRARY_HELPERS)}
    if named:
        listed = "; ".join(f"pid {pid} ({command})" for pid, command in named.items())
        print(f"{what} left {len(named)} process{'es' if len(named) > 1 else ''} running, ended with it: "
              f"{listed}", file=sys.stderr, flush=True)


TORCH_WORKERS = f"torch{os.sep}_inductor{os.sep}"
LIBRARY_HELPERS = (TORCH_WORKERS, "multiprocessing.resource_tracker")


_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans of this process's descendants (a daemon the model starts) become its children, not
    init's: descendants() finds them."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def descendants(root: int) -> dict[int, str]:
    """The processes below `root` (children, theirs, ...), each with its command line (Linux /proc)."""
    parents, commands = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            parents[int(entry)] = int(fields[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                commands[int(entry)] = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = commands.get(pid, "")[:200] or "?"
                frontier.append(pid)
    return found


def _describe(wait_status: int) -> str:
    if os.WIFSIGNALED(wait_status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
    return f"exit {os.WEXITSTATUS(wait_status)}"
