"""Start each GPU job's Python as a fork of a server that has imported torch already.

A job's own process would spend seconds on the interpreter's start, `import
torch` and torch._dynamo (AdamW's constructor loads it) before its first
measurement; a study of a hundred and more jobs pays that a hundred times,
for nothing it measures. So the GPU lease's wrapper (lmstudy.launch.gpu_lease)
hands the job's command to a server that did those imports once and never
touched CUDA: the server forks, and the child becomes the job, with the
job's arguments, environment, working directory, CPU cores and standard
streams. CUDA initialisation, the model build and the first steps, the cold
start the study measures, happen in the child, exactly as in a new process.

The server is this user's, per environment: the interpreter, the lmstudy
sources and every environment variable but the per-job ones (the lease's,
CUDA_VISIBLE_DEVICES) name it, so a changed environment or an edited source
gets a server of its own and never a stale import. It is started by the first
job that needs it and exits after LMSTUDY_JOB_SERVER_IDLE_S seconds without a
job (default 120). A job whose wrapper dies (Snakemake cancelled it) is
killed with its whole process group: nothing goes on measuring unseen.

Where it is not used: LMSTUDY_JOB_SERVER=0, a command that is not this
Python running a script or `-m lmstudy` (the study's command), and SLURM jobs (each job is its own allocation:
a server would die with the first job's, and could not outlive it anyway).

The request is plain data (JSON) and the standard streams and lease travel
as file descriptors (SCM_RIGHTS); nothing is unpickled.

Stdlib-only: the wrapper imports it before anything else.
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import fcntl
import hashlib
import importlib
import importlib.util
import json
import os
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from lmstudy import job_process
from lmstudy.job_process import env_number, env_switch
from lmstudy.launch.watch import RUNTIME_ENV, STOPPED, WORKFLOW_PID_ENV, Watch, process_start, wait_readable

ENABLE_ENV = "LMSTUDY_JOB_SERVER"
IDLE_ENV = "LMSTUDY_JOB_SERVER_IDLE_S"
DIR_ENV = "LMSTUDY_JOB_SERVER_DIR"
DEFAULT_IDLE_S = 120.0
# How often an idle server looks whether the Snakemake runs it served have ended (then it exits, rather
# than stay DEFAULT_IDLE_S after the run).
WORKFLOW_POLL_S = 2.0
# Variables that differ from job to job and are set in the child: they must
# not give each job a server of its own. The device's are read at CUDA
# initialisation, which happens in the child; the shell's by nothing we import.
PER_JOB_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "_", "PWD", "OLDPWD", "SHLVL",
                     WORKFLOW_PID_ENV, RUNTIME_ENV)
PER_JOB_PREFIXES = ("LMSTUDY_GPU_", "LMSTUDY_CPU_CORES")
ROOT = Path(__file__).resolve().parents[2]
# How long a server may take to import torch before the job gives up on it.
START_TIMEOUT_S = 300.0
# How long a running server may take to accept a job and fork it (milliseconds
# when it is well); one stopped (SIGSTOP) or stuck would hold every job forever.
TIMEOUT_ENV = "LMSTUDY_JOB_SERVER_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 30.0
# At most this many bytes of request (arguments and environment).
MAX_REQUEST = 1 << 22
MAX_FDS = 8


class ServerUnavailable(RuntimeError):
    """The server could not be started or reached; the job runs as its own process instead."""


def wanted(command: list[str], environ=os.environ) -> bool:
    """Whether `command` runs through the server (module docstring)."""
    if not env_switch(environ, ENABLE_ENV):
        return False
    # the server's settings, said before it starts (it runs detached, its errors in no job's log)
    _timeout_s(environ)
    _idle_s(environ)
    if "SLURM_JOB_ID" in environ:
        return False
    program = shutil.which(command[0]) if command else None
    return (
        len(command) >= 2
        and program is not None
        and os.path.realpath(program) == os.path.realpath(sys.executable)
        and (
            (command[1].endswith(".py") and not command[1].startswith("-"))
            or _module_run(command[1:]) is not None
        )
    )


def _module_run(argv: list[str]) -> str | None:
    """The module of `-m MODULE ...` (the study's command, python -m lmstudy), else None."""
    return argv[1] if len(argv) >= 2 and argv[0] == "-m" else None


def server_environment(environ) -> dict[str, str]:
    """What the server runs with: the job's environment less the per-job variables."""
    return {
        k: v
        for k, v in environ.items()
        if k not in PER_JOB_VARIABLES and not k.startswith(PER_JOB_PREFIXES)
    }


# What a server imports before it forks jobs: the measuring jobs' libraries
# (torch), or the analysing side's (pandas, matplotlib, Jinja2: never torch,
# which those jobs must not load; tests/test_cpu_side_imports.py).
KINDS = ("torch", "cpu")


def server_key(environ, kind: str = "torch") -> str:
    """The name of the `kind` server for this environment, interpreter and lmstudy sources."""
    digest = hashlib.sha256(kind.encode() + b"\0")
    digest.update(os.path.realpath(sys.executable).encode())
    for path in sorted((ROOT / "lmstudy").rglob("*.py")):
        digest.update(str(path).encode() + b"\0" + path.read_bytes())
    for k, v in sorted(server_environment(environ).items()):
        digest.update(f"{k}={v}\0".encode())
    return digest.hexdigest()[:20]


def server_dir(environ=os.environ) -> Path:
    """This user's folder of server sockets, private to them (mode 0700)."""
    folder = Path(environ.get(DIR_ENV) or f"/tmp/lmstudy-job-servers-{os.getuid()}")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not folder.is_dir() or folder.is_symlink() or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ServerUnavailable(f"{folder} is not a private folder of this user's")
    return folder


# ---------------------------------------------------------------- the wire
def _send_message(sock: socket.socket, payload: dict, fds: list[int] = ()) -> None:
    data = json.dumps(payload).encode()
    header = struct.pack("!I", len(data))
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([header + data], ancillary)


def _receive_message(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """One message and the descriptors sent with it; (None, []) at end of stream."""
    fds = array.array("i")
    data, ancillary, _, _ = sock.recvmsg(MAX_REQUEST + 4, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, cmsg in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cmsg[: len(cmsg) - len(cmsg) % fds.itemsize])
    if not data:
        return None, list(fds)
    length = struct.unpack("!I", data[:4])[0]
    if length > MAX_REQUEST:
        raise ValueError("request too large")
    while len(data) - 4 < length:
        more = sock.recv(length + 4 - len(data))
        if not more:
            raise ValueError("request cut short")
        data += more
    return json.loads(data[4 : 4 + length]), list(fds)


# ---------------------------------------------------------------- the job's side
def run(command: list[str], env: dict[str, str], started_at: float, keep_fds: tuple[int, ...] = (),
        log=sys.stderr, kind: str = "torch") -> int:
    """Run `command` (this Python and a script) as a fork of the `kind` server; its exit status.

    Raises ServerUnavailable when no server can be had: nothing ran then.
    """
    timeout_s = _timeout_s(env)
    try:
        folder = server_dir(env)
        key = server_key(env, kind)
        sock = _connect(folder, key, env, kind, timeout_s)
    except OSError as error:  # a socket or lock path that is a folder, a full disk, ...
        raise ServerUnavailable(f"the job server cannot be reached ({error})") from None
    fds = [0, 1, 2, *keep_fds]
    request = {
        "argv": command[1:],
        "env": env,
        "cwd": os.getcwd(),
        "fds": fds,
        "cpus": sorted(os.sched_getaffinity(0)),
        "started_at": started_at,
        "umask": _umask(),
    }
    reply = _hand_over(sock, request, fds, timeout_s)
    # From here the job runs, for as long as it takes: our death kills it (the server sees the socket
    # close), and so do the workflow's death and the job's time limit (lmstudy.launch.watch).
    sock.settimeout(None)
    watch = Watch(env)
    reason = wait_readable(sock.fileno(), watch)
    if reason:
        watch.stop(int(reply["pid"]), reason, log=log, group=True)
        sock.close()
        return STOPPED
    try:
        done, _ = _receive_message(sock)
    except (OSError, ValueError):
        done = None
    return _job_status(done, log)


def _hand_over(sock: socket.socket, request: dict, fds: list[int], timeout_s: float) -> dict:
    """Send the job's request and streams to the server; its reply, which names the job's pid.

    Raises ServerUnavailable when the server does not take it: nothing ran then.
    """
    try:
        # The server greets first: the job's streams travel only to a server that answers, since
        # streams sent to a stopped one would stay open in its queue (and whoever reads them wait).
        greeting, _ = _receive_message(sock)
        if greeting is None or not greeting.get("ready"):
            raise ValueError("no greeting")
        _send_message(sock, request, fds)
        reply, _ = _receive_message(sock)
    except TimeoutError:
        sock.close()  # the server, should it wake, sees the job gone and does not start it
        raise ServerUnavailable(
            f"the job server did not answer within {timeout_s:g} s (stopped or stuck; {TIMEOUT_ENV} "
            "sets how long to wait)") from None
    except (OSError, ValueError) as error:
        sock.close()
        raise ServerUnavailable(f"the job server did not take the job ({error})") from None
    if reply is None or "pid" not in reply:
        raise ServerUnavailable("the job server closed the connection before starting the job")
    return reply


def _job_status(done: dict | None, log) -> int:
    """The exit status to return for the job the server reported `done` (None: the server went away)."""
    if done is None:
        print("error: the job server went away while the job ran", file=log, flush=True)
        return 70
    status = done["status"]
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        print(f"error: the job's process was killed by signal {signal.Signals(number).name}",
              file=log, flush=True)
        return 128 + number
    return os.WEXITSTATUS(status)


def _timeout_s(env) -> float:
    what = "how long a job waits for the job server, in seconds"
    return env_number(env, TIMEOUT_ENV, DEFAULT_TIMEOUT_S, what, positive=True)


def _idle_s(env) -> float:
    return env_number(env, IDLE_ENV, DEFAULT_IDLE_S, "how long an idle job server stays, in seconds")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _connect(folder: Path, key: str, env: dict[str, str], kind: str, timeout_s: float) -> socket.socket:
    path = folder / f"{key}.sock"
    with contextlib.suppress(OSError):
        return _open(path, timeout_s)
    # One job starts the server; the others wait for it on this lock.
    with open(folder / f"{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):
            return _open(path, timeout_s)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        server = _start_server(path, env, kind)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                return _open(path, timeout_s)
            if server.poll() is not None:
                raise ServerUnavailable(
                    f"the job server exited ({server.returncode}) before taking jobs; "
                    f"see {path.with_suffix('.log')}")
            time.sleep(0.05)
        server.kill()
        raise ServerUnavailable(f"the job server did not start within {START_TIMEOUT_S:.0f} s")


def _open(path: Path, timeout_s: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


def _start_server(path: Path, env: dict[str, str], kind: str) -> subprocess.Popen:
    code = "import sys; from lmstudy.launch.job_server import serve; serve(sys.argv[1], sys.argv[2])"
    # The server imports the lmstudy this module is, as the job would: this checkout's.
    paths = (str(ROOT), env.get("PYTHONPATH", ""))
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    log = open(path.with_suffix(".log"), "ab")  # noqa: SIM115 - the server's, closed with our copy below
    try:
        # Its own session: Snakemake cancelling the job that started it must
        # not take the server (and the other jobs' processes) down with it.
        # All the CPUs this job may use, not only its lease's share.
        return subprocess.Popen(
            [sys.executable, "-c", code, str(path), kind],
            env=server_environment(env), cwd=str(ROOT), stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True, close_fds=True,
        )
    finally:
        log.close()


# ---------------------------------------------------------------- the server
def _preload(kind: str) -> None:
    """The imports every job of `kind` would do, and nothing that touches a device.

    By name (importlib): they are the jobs' libraries, which the server loads
    for them and never uses itself; the launcher stays stdlib-only
    (tests/test_import_graph.py).
    """
    load = importlib.import_module
    if kind == "cpu":
        load("jinja2")
        load("matplotlib").use("Agg")  # what the figure scripts use; no display is looked for
        for name in ("matplotlib.pyplot", "pandas", "yaml", "pandas.io.formats.style"):
            load(name)
        return
    # Compile time is a measurement: each compiling job gets an empty cache of its own
    # (lmstudy.cli.compile_from_scratch), so the caches stay on here.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    load("numpy")
    load("pandas")
    torch = load("torch")

    # AdamW's constructor imports torch._dynamo (seconds); torch.empty only allocates.
    torch.optim.AdamW([torch.nn.Parameter(torch.empty(1))])


def serve(path: str, kind: str = "torch") -> None:
    """Take jobs on the socket at `path` until idle for LMSTUDY_JOB_SERVER_IDLE_S seconds."""
    started = time.perf_counter()
    if kind == "torch":
        job_process.own_torch_scratch()  # the preload's torch._dynamo would leave <tmp>/torchinductor_<user>
    _preload(kind)
    idle_s = _idle_s(os.environ)
    listener = _listen(path)
    ours = os.stat(path).st_ino
    ready_s = time.perf_counter() - started
    print(f"job server {os.getpid()} ({kind}): ready in {ready_s:.1f} s on {path}", flush=True)
    wakeup_read, wakeup_write = _wake_on_signals()
    served = _Served(selectors.DefaultSelector(), [listener.fileno(), wakeup_read, wakeup_write])
    served.selector.register(listener, selectors.EVENT_READ, "accept")
    served.selector.register(wakeup_read, selectors.EVENT_READ, "signal")
    last_active = time.monotonic()
    try:
        while True:
            for event, _ in served.selector.select(timeout=max(1.0, min(idle_s / 4, WORKFLOW_POLL_S))):
                if event.data == "accept":
                    served.accept(listener)
                elif event.data == "signal":
                    with contextlib.suppress(BlockingIOError):
                        os.read(wakeup_read, 4096)
                else:  # a job's connection: readable means its wrapper died
                    served.selector.unregister(served.jobs[event.data])
                    _kill_job(event.data)
            served.report_ended()
            if served.jobs:
                last_active = time.monotonic()
            elif reason := served.reason_to_exit(time.monotonic() - last_active, idle_s):
                print(f"job server {os.getpid()}: {reason}, exiting", flush=True)
                return
    finally:
        for pid in served.jobs:  # a job outliving its server would go on unseen
            _kill_job(pid)
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == ours:  # not a newer server's
                os.unlink(path)
                _remove_traces(Path(path))
        listener.close()


def _listen(path: str) -> socket.socket:
    """A socket listening at `path`, bound beside it and moved there: jobs connect only once it listens."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    temporary = f"{path}.{os.getpid()}"
    listener.bind(temporary)
    listener.listen(64)
    os.replace(temporary, path)
    return listener


def _wake_on_signals() -> tuple[int, int]:
    """A pipe that a signal writes to (its read and write ends), so that the server's select wakes when a
    job ends (SIGCHLD); SIGTERM ends the server through its cleanup."""
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    os.set_blocking(wakeup_read, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return wakeup_read, wakeup_write


@dataclasses.dataclass
class _Served:
    """The jobs a server runs and where they came from."""

    selector: selectors.BaseSelector
    inherited: list[int]  # the server's own descriptors, which a job closes
    jobs: dict[int, socket.socket] = dataclasses.field(default_factory=dict)  # child pid -> its connection
    # (pid, start) of the Snakemake runs whose jobs it took; None: a job by hand
    workflows: set = dataclasses.field(default_factory=set)
    scratch: dict[int, str | None] = dataclasses.field(default_factory=dict)  # child pid -> its $TMPDIR

    def accept(self, listener: socket.socket) -> None:
        """Take the job a connection asks for, if it is one."""
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            child, env = _take_job(conn, [*self.inherited, *(c.fileno() for c in self.jobs.values())])
            if child is not None:
                self.jobs[child] = conn
                self.scratch[child] = env.get("TMPDIR")
                self.workflows.add(_workflow_of(env))
                self.selector.register(conn, selectors.EVENT_READ, child)

    def report_ended(self) -> None:
        """Tell each ended job's wrapper its exit status, and forget the job."""
        for pid, status in _reaped():
            # A killed job ran no exit handler: its scratch folder is removed here.
            job_process.remove_scratch_of(pid, self.scratch.pop(pid, None))
            conn = self.jobs.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self.selector.unregister(conn)
                with contextlib.suppress(OSError):
                    _send_message(conn, {"status": status})
                conn.close()

    def reason_to_exit(self, idle_for_s: float, idle_s: float) -> str | None:
        """Why a server with no job running should exit now; None: it stays."""
        if idle_for_s > idle_s:
            return f"idle for {idle_s:.0f} s"
        if None not in self.workflows and self.workflows and all(
            process_start(p) != t for p, t in self.workflows
        ):
            # Every job came from a Snakemake run, and each has ended: nothing more will come.
            return "the workflows it served have ended"
        return None


def _remove_traces(path: Path) -> None:
    """A server that ends leaves nothing: its lock and log, and the folder once it is empty.

    Only while no job is starting a server of this key (it holds the lock): a
    job that opened the lock file just before it went may start a second
    server, which is harmless (the two serve alike, each exits when idle).
    A job that finds the folder gone runs as a process of its own (run()).
    """
    lock_path = path.with_suffix(".lock")
    with contextlib.suppress(OSError), open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a job starts a server
        for leftover in (lock_path, path.with_suffix(".log")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when empty: other servers' files stay


def _reaped() -> list[tuple[int, int]]:
    done = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.append((pid, status))


def _kill_job(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _take_job(conn: socket.socket, server_fds: list[int]) -> tuple[int | None, dict]:
    """Fork the job `conn` asks for; its pid (None when the request was not one) and its environment."""
    conn.settimeout(30)
    fds: list[int] = []
    try:
        _send_message(conn, {"ready": True})
        request, fds = _receive_message(conn)
        if request is None or len(fds) != len(request["fds"]):
            raise ValueError("a request without its streams")
        if _peer_gone(conn):
            raise ValueError("the job gave up waiting before it was taken")
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"job server: refused a request ({error})", flush=True)
        for fd in fds:
            os.close(fd)
        conn.close()
        return None, {}
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _become_job(request, fds, [*server_fds, conn.fileno()])  # never returns
    for fd in fds:
        os.close(fd)
    conn.settimeout(None)
    try:
        _send_message(conn, {"pid": pid})
    except OSError:
        _kill_job(pid)
    return pid, request["env"]


def _workflow_of(env: dict) -> tuple[int, str | None] | None:
    """The Snakemake process a job came from ((pid, start), lmstudy.launch.watch), None for one by hand."""
    try:
        pid = int(env.get(WORKFLOW_PID_ENV) or 0)
    except ValueError:
        return None
    return (pid, process_start(pid)) if pid > 1 else None


def _peer_gone(conn: socket.socket) -> bool:
    """Whether the job's side closed its connection (it sends nothing after its request)."""
    # select, not a non-blocking recv: a socket with a timeout waits that long before receiving.
    readable, _, _ = select.select([conn], [], [], 0)
    if not readable:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _become_job(request: dict, received: list[int], server_fds: list[int]) -> None:
    """In the forked child: leave the server behind, take the job's streams and settings, run its
    command and exit with its status."""
    status = 1
    try:
        _leave_server(server_fds)
        _take_streams(received, [int(fd) for fd in request["fds"]])
        _take_settings(request)
        status = _run_command([str(a) for a in request["argv"]])
    except BaseException:  # noqa: BLE001 - the job's own setup failed: say so on its stderr
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def _leave_server(server_fds: list[int]) -> None:
    """The job as a process of its own: its own group, the default signal handlers, and none of the
    server's descriptors."""
    os.setsid()  # its own process group: killing the job kills what it started
    job_process.die_with_parent(os.getppid())
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    for fd in server_fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _take_streams(received: list[int], targets: list[int]) -> None:
    """The descriptors the job sent, at the numbers it had them (0, 1, 2 and those it keeps)."""
    # Out of the way first, so no descriptor lands on one still to be moved.
    moved = [os.dup(fd) for fd in received]
    for fd in received:
        os.close(fd)
    for source, target in zip(moved, targets, strict=True):
        os.dup2(source, target, inheritable=True)
    for source in moved:
        if source not in targets:
            os.close(source)


def _take_settings(request: dict) -> None:
    """The job's umask, working directory, environment, CPUs and start time, as its own process had."""
    os.umask(int(request["umask"]))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # the job's $TMPDIR, not the one the server cached
    cpus = request["cpus"]
    os.sched_setaffinity(0, cpus)
    if "torch" in sys.modules and "OMP_NUM_THREADS" not in os.environ:
        # What a new process with these CPUs would use.
        sys.modules["torch"].set_num_threads(len(cpus))
    job_process.PROCESS_STARTED_AT = float(request["started_at"])


def _run_command(argv: list[str]) -> int:
    """Run the job's script or module (`python -m ...`) as __main__ in this process; its exit status."""
    module = _module_run(argv)
    import runpy

    # sys.argv as the interpreter sets it (for -m: the module's file first, for good, so that
    # exit handlers see it too). sys.path stays the server's: its first entry, "" (the working
    # directory), is what `-m` gives; the workflow's scripts import no sibling of theirs.
    if module:
        main = importlib.util.find_spec(f"{module}.__main__") or importlib.util.find_spec(module)
        sys.argv = [main.origin, *argv[2:]]
    else:
        sys.argv = argv
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=False)
        else:
            runpy.run_path(argv[0], run_name="__main__")
        status = 0
    except SystemExit as done:
        status = _exit_status(done.code)
    except BaseException:  # noqa: BLE001 - as Python itself reports an uncaught exception
        traceback.print_exc()
        status = 1
    _run_exit_handlers()
    return status


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_exit_handlers() -> None:
    import atexit

    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
