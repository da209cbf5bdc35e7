"""One measurement per GPU, machine-wide: every GPU job holds an exclusive lease on one GPU.

Two measurements on one GPU spoil each other, and Snakemake's `--resources
gpu=K` only counts jobs inside one Snakemake process: two runs in one clone,
or two clones, would share a GPU. So every GPU job takes a lease first: an
exclusive flock(2) on a lock file per GPU in a lease folder: by default this
user's own, private one (default_lease_dir), shared by every run of this user
on the machine; LMSTUDY_GPU_LEASE_DIR names one that several users share, which
is checked (lease_dir_of) and never changed. The
lock belongs to the open file, which the job's process inherits across exec:
it is held for the job's whole life and released by the kernel when the job
ends, however it ends (SIGKILL included). The job sees only its GPU
(CUDA_VISIBLE_DEVICES, set before CUDA is initialised) and gets its own share
of the CPU cores, so that a launch-bound model is not slowed by a neighbour.

Which GPUs: LMSTUDY_GPUS (comma-separated nvidia-smi indices; on a machine
without nvidia-smi they are taken as they are, which is how the CPU tests
lease "fake" GPUs), else every GPU nvidia-smi lists, narrowed to
CUDA_VISIBLE_DEVICES where the user set it. No GPU at all (a CPU run): no
lease. Under SLURM the scheduler has chosen the job's GPU and isolates it:
its CUDA_VISIBLE_DEVICES is used as it is, with no lease.

What the job learns (environment variables named in lmstudy.job_process,
recorded in its rows' provenance and in its phase record): the
GPU's index and UUID, how it was chosen, how long the job waited, processes
not ours that were on the GPU when the lease was taken, and its CPU cores
(lmstudy.launch.cpu_placement).

Torch-free and stdlib-only: it runs before the job's Python imports anything.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lmstudy.job_process import (
    CORES_ENV,
    FD_ENV,
    FOREIGN_ENV,
    INDEX_ENV,
    LEASED_AT_ENV,
    SOURCE_ENV,
    UUID_ENV,
    WAITED_ENV,
    seconds_since_process_start,
)
from lmstudy.launch import job_server
from lmstudy.launch.cpu_placement import cores_for, cores_text, pinning_wanted
from lmstudy.launch.watch import exec_watched

LEASE_DIR_ENV = "LMSTUDY_GPU_LEASE_DIR"
GPUS_ENV = "LMSTUDY_GPUS"
# Set for the leased job, beside the variables of lmstudy.job_process: the lock file it holds.
LOCK_ENV = "LMSTUDY_GPU_LEASE_FILE"
# Which device the run measures on (config `device`), set by the workflow's lmstudy_gpu.
DEVICE_ENV = "LMSTUDY_DEVICE"
# How many GPUs the job leases at once (its rule's resources: gpu=N; unset: 1, 0: none).
COUNT_ENV = "LMSTUDY_GPU_COUNT"
# Every lock a job of several GPUs holds, its descriptors comma-separated (FD_ENV is the first).
FDS_ENV = "LMSTUDY_GPU_LEASE_FDS"
LEASE_VARIABLES = (
    FD_ENV, INDEX_ENV, UUID_ENV, SOURCE_ENV, WAITED_ENV, LEASED_AT_ENV, FOREIGN_ENV, CORES_ENV, LOCK_ENV,
    FDS_ENV,
)

# How often a waiting job tries again: a lease is held for seconds to
# minutes, so half a second of latency costs nothing.
POLL_S = 0.5


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str = ""
    # Its PCI address (nvidia-smi's pci.bus_id): where it sits, for the cores nearest to it.
    bus_id: str = field(default="", compare=False)

    @property
    def visible_as(self) -> str:
        """What CUDA_VISIBLE_DEVICES names it by: the UUID, which no device ordering can renumber."""
        return self.uuid or self.index

    @property
    def lock_name(self) -> str:
        return f"gpu-{self.uuid or self.index}.lock"


class LeaseError(Exception):
    """A GPU job cannot take its lease; the message says what to fix."""


def _nvidia_smi(*query: str) -> list[list[str]]:
    """Rows of an nvidia-smi CSV query; [] where there is no nvidia-smi (a machine without GPUs).

    An nvidia-smi that is there but fails is an error, not "no GPUs": the job
    would otherwise run unleased beside leased jobs.
    """
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", *query, "--format=csv,noheader,nounits"],
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise LeaseError(
            f"nvidia-smi failed ({error}), so no GPU can be leased safely; fix the driver, or name the "
            f"GPUs to use in {GPUS_ENV}"
        ) from None
    return parse_csv(out)


def parse_csv(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in csv.reader(io.StringIO(text)) if row]


GPU_QUERY = "--query-gpu=index,uuid,pci.bus_id"


def gpus_of(smi_rows: list[list[str]]) -> list[Gpu]:
    """The GPUs of `nvidia-smi --query-gpu=index,uuid[,pci.bus_id]` rows."""
    return [Gpu(row[0], row[1], row[2] if len(row) > 2 else "") for row in smi_rows if len(row) >= 2]


def pool(environ=os.environ, listed: list[Gpu] | None = None) -> list[Gpu]:
    """The GPUs this machine's jobs may lease (module docstring); [] for none."""
    listed = gpus_of(_nvidia_smi(GPU_QUERY)) if listed is None else listed
    wanted = environ.get(GPUS_ENV, "").strip()
    if wanted:
        by_index = {gpu.index: gpu for gpu in listed}
        names = [i for i in (s.strip() for s in wanted.split(",")) if i]
        unknown = [i for i in names if listed and i not in by_index]
        if unknown:
            raise LeaseError(
                f"{GPUS_ENV} names GPU {', '.join(unknown)}, which nvidia-smi does not list "
                f"(it lists {', '.join(by_index)}); name GPUs by nvidia-smi's indices"
            )
        # Without nvidia-smi (the CPU tests) the indices are taken as they are.
        return [by_index.get(i, Gpu(i)) for i in names]
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        names = {s.strip() for s in visible.split(",") if s.strip()}
        return [gpu for gpu in listed if gpu.index in names or gpu.uuid in names]
    return listed


def under_slurm(environ=os.environ) -> bool:
    """A SLURM job the scheduler gave at most one GPU: it chose the GPU, and isolates it.

    A SLURM allocation of several GPUs in which Snakemake runs its jobs
    itself (salloc --gpus=4, then --resources gpu=4) still needs leases among them.
    """
    if "SLURM_JOB_ID" not in environ:
        return False
    visible = [d for d in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return len(visible) <= 1


def foreign_processes(gpu: Gpu, ours: set[int], apps: list[list[str]] | None = None) -> str:
    """Compute processes on `gpu` that are not ours, as nvidia-smi lists them; "" for none.

    `apps`: rows of `nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory`.
    """
    if apps is None:
        apps = _nvidia_smi("--query-compute-apps=gpu_uuid,pid,process_name,used_memory")
    seen = []
    for row in apps:
        if len(row) < 4 or (gpu.uuid and row[0] != gpu.uuid) or (not gpu.uuid):
            continue
        try:
            pid = int(row[1])
        except ValueError:
            continue
        if pid in ours:
            continue
        seen.append(f"pid {pid} {os.path.basename(row[2])} ({row[3]} MiB)")
    return "; ".join(seen)


class Lease:
    """An exclusive lock on one GPU's lock file, held through the open file `fd`."""

    def __init__(self, gpu: Gpu, slot: int, fd: int, waited_s: float) -> None:
        self.gpu, self.slot, self.fd, self.waited_s = gpu, slot, fd, waited_s
        self.leased_at = time.time()

    def release(self) -> None:
        os.close(self.fd)


def _lock_mode(folder_mode: int) -> int:
    """A lock file is writable by whoever may write its folder: this user, in a shared one others too."""
    mode = 0o600
    if folder_mode & 0o020:
        mode |= 0o060
    if folder_mode & 0o002:
        mode |= 0o006
    return mode


def _open_lock(lease_dir: Path, gpu: Gpu) -> int:
    """The GPU's lock file, opened for writing: never through a symbolic link or a hard link, and
    created only where it does not exist (another user's file in a sticky folder cannot be opened
    with O_CREAT where fs.protected_regular is on)."""
    path = lease_dir / gpu.lock_name
    while True:
        try:
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            except FileNotFoundError:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                except FileExistsError:
                    continue  # another job created it just now: open theirs
                os.fchmod(fd, _lock_mode(os.stat(lease_dir).st_mode))
        except OSError as error:
            if error.errno == errno.ELOOP:  # what O_NOFOLLOW answers for a link
                raise LeaseError(
                    f"the GPU lease file {path} is a symbolic link{_target(path)}{_made_by(path)}, which a "
                    "lock file must never be (whoever made it could point the lock at any file): "
                    f"{_remove(path)}"
                ) from None
            raise LeaseError(
                f"cannot open the GPU lease file {path} ({error.strerror}); name a folder you can write "
                f"in {LEASE_DIR_ENV}"
            ) from None
        info = os.fstat(fd)
        # A hard link would let whoever made it have this job truncate another file (as root: any).
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            raise LeaseError(
                f"{path} is not a lock file of its own (a special file or a hard link); remove it, or "
                f"name another folder in {LEASE_DIR_ENV}"
            )
        return fd


def _made_by(path: Path) -> str:
    """", made by <user>" of the file at `path` (not followed), or "" where it cannot be told."""
    try:
        uid = os.lstat(path).st_uid
    except OSError:
        return ""
    return f", made by {_user_name(uid)}" if uid != os.getuid() else ", made by this user"


def _user_name(uid: int) -> str:
    import pwd

    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"user id {uid}"


def _remove(path: Path) -> str:
    """How to be rid of a planted file: rm it where this user owns it, else its owner or an administrator."""
    try:
        uid = os.lstat(path).st_uid
    except OSError:
        uid = os.getuid()
    if uid == os.getuid():
        return f"remove the link (rm '{path}'), or name another folder in {LEASE_DIR_ENV}"
    return (f"ask {_user_name(uid)} or an administrator to remove it (it is not yours to remove), or name "
            f"a folder of your own in {LEASE_DIR_ENV}")


def _target(link: Path) -> str:
    try:
        return f" to {os.readlink(link)}"
    except OSError:
        return ""


def _holder(lease_dir: Path, gpu: Gpu) -> str:
    try:
        with open(lease_dir / gpu.lock_name, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as file:
            # Only as much as a record takes: the file is anyone's in a shared folder.
            return str(json.loads(file.read(4096) or b"{}").get("what", ""))[:300]
    except (OSError, ValueError, AttributeError):
        return ""


def _still_named(lease_dir: Path, gpu: Gpu, fd: int) -> bool:
    """Whether the locked file is still the one the folder names: one renamed or replaced after we
    opened it would let the next job lock another file for the same GPU."""
    try:
        named = os.stat(lease_dir / gpu.lock_name, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _try(lease_dir: Path, gpu: Gpu) -> int | None:
    fd = _open_lock(lease_dir, gpu)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if not _still_named(lease_dir, gpu, fd):
        os.close(fd)
        return None  # tried again on the next round, with the file the folder names now
    return fd


def default_lease_dir(environ=os.environ, uid: int | None = None) -> Path:
    """This user's own lease folder, where no other user can make or change anything.

    root: /run/lmstudy-gpu-leases (only root writes /run); another user: their
    XDG_RUNTIME_DIR (/run/user/<uid>, theirs alone) where it is set, else
    /tmp/lmstudy-gpu-leases-<uid>, made private (checked by lease_dir_of).
    """
    uid = os.getuid() if uid is None else uid
    if uid == 0 and os.access("/run", os.W_OK):
        return Path("/run/lmstudy-gpu-leases")
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if uid != 0 and runtime:
        with contextlib.suppress(OSError):
            info = os.stat(runtime, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and not info.st_mode & 0o077:
                return Path(runtime) / "lmstudy-gpu-leases"
    return Path(f"/tmp/lmstudy-gpu-leases-{uid}")


def lease_dir_of(environ=os.environ) -> Path:
    """The lease folder, checked to be safe: never a link, this user's (or root's), and where others
    may write it, sticky. A folder the user names is never changed; the default one is made private.

    Who shares leases is whoever can write the folder: by default this user alone; with
    LMSTUDY_GPU_LEASE_DIR, every user the folder's owner lets write it (README, "Install and run").
    """
    named = environ.get(LEASE_DIR_ENV, "")
    path = Path(named) if named else default_lease_dir(environ)
    fix = f"name a folder of yours in {LEASE_DIR_ENV}"
    if named:
        fix = f"fix it, or name another in {LEASE_DIR_ENV}"
    try:
        if not os.path.lexists(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                path.mkdir(mode=0o700)
        info = os.stat(path, follow_symlinks=False)
    except OSError as error:
        raise LeaseError(f"cannot make the GPU lease folder {path} ({error.strerror}); {fix}") from None
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        raise LeaseError(f"the GPU lease folder {path} is a symbolic link, which others may redirect; {fix}")
    if not stat.S_ISDIR(info.st_mode):
        raise LeaseError(f"the GPU lease folder {path} is not a folder; {fix}")
    if info.st_uid not in (os.getuid(), 0):
        raise LeaseError(
            f"the GPU lease folder {path} belongs to another user (uid {info.st_uid}), who could rename or "
            f"block its lock files; {fix}"
        )
    if not named and mode & 0o077:
        raise LeaseError(
            f"the GPU lease folder {path} can be read or written by other users (mode {mode:o}), who could "
            f"rename or block its lock files; remove it, or {fix}"
        )
    if mode & 0o002 and not mode & stat.S_ISVTX:
        raise LeaseError(
            f"the GPU lease folder {path} is writable by every user but not sticky (mode {mode:o}), so any "
            f"user could rename a held lock file; make it sticky (chmod +t {path}), or {fix}"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise LeaseError(f"the GPU lease folder {path} is not writable by this user (mode {mode:o}); {fix}")
    return path


def acquire(gpus: list[Gpu], lease_dir: Path, what: str, log=sys.stderr, poll_s: float = POLL_S) -> Lease:
    """Lease the first free GPU of `gpus`, waiting (and saying so once) while all are leased."""
    started = time.monotonic()
    announced = False
    while True:
        for slot, gpu in enumerate(gpus):
            fd = _try(lease_dir, gpu)
            if fd is None:
                continue
            lease = Lease(gpu, slot, fd, time.monotonic() - started)
            record = {"pid": os.getpid(), "what": f"pid {os.getpid()}: {what}", "since": lease.leased_at}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
            if announced:
                print(f"gpu lease: GPU {gpu.index} is free after {lease.waited_s:.1f} s", file=log,
                      flush=True)
            return lease
        if not announced:
            holders = "; ".join(f"GPU {g.index}: {_holder(lease_dir, g) or 'a job'}" for g in gpus)
            print(
                f"gpu lease: all {len(gpus)} GPU(s) are leased ({holders}); waiting for one "
                f"(leases in {lease_dir})",
                file=log, flush=True,
            )
            announced = True
        time.sleep(poll_s)


def gpu_count(environ=os.environ) -> int:
    """How many GPUs the job asks for (COUNT_ENV), checked: a whole number, at least 0."""
    text = environ.get(COUNT_ENV, "1").strip() or "1"
    if not text.isdigit():
        raise LeaseError(f"{COUNT_ENV}={text!r} is not a number of GPUs: set it to a whole number")
    return int(text)


def acquire_many(
    gpus: list[Gpu], lease_dir: Path, what: str, count: int, log=sys.stderr, poll_s: float = POLL_S
) -> list[Lease]:
    """Lease `count` GPUs of `gpus` at once, waiting (and saying so once) until that many are free.

    All or none: a round that finds fewer free gives back those it took before
    waiting, so two jobs of several GPUs never hold part of what each needs.
    """
    if count == 1:
        return [acquire(gpus, lease_dir, what, log=log, poll_s=poll_s)]
    if count > len(gpus):
        raise LeaseError(
            f"this job needs {count} GPUs at once and this machine's pool has {len(gpus)} "
            f"({', '.join(g.index for g in gpus)}): run it on a node with {count} GPUs, or lower the "
            "section's world sizes in the config"
        )
    started = time.monotonic()
    announced = False
    while True:
        held: list[Lease] = []
        for slot, gpu in enumerate(gpus):
            fd = _try(lease_dir, gpu)
            if fd is not None:
                held.append(Lease(gpu, slot, fd, 0.0))
            if len(held) == count:
                break
        if len(held) == count:
            waited = time.monotonic() - started
            for lease in held:
                lease.waited_s = waited
                record = {"pid": os.getpid(), "what": f"pid {os.getpid()}: {what}", "since": lease.leased_at}
                os.ftruncate(lease.fd, 0)
                os.pwrite(lease.fd, json.dumps(record).encode(), 0)
            if announced:
                print(f"gpu lease: {count} GPUs are free after {waited:.1f} s", file=log, flush=True)
            return held
        for lease in held:
            lease.release()
        if not announced:
            print(
                f"gpu lease: fewer than {count} of the {len(gpus)} GPU(s) are free; waiting for {count} "
                f"at once (leases in {lease_dir})",
                file=log, flush=True,
            )
            announced = True
        time.sleep(poll_s)


def group_environment(leases: list[Lease], cores: list[int], foreign: str) -> dict[str, str]:
    """The variables a job holding several leases runs with: each GPU's, comma-separated."""
    env = job_environment(leases[0], cores, foreign)
    env.update({
        "CUDA_VISIBLE_DEVICES": ",".join(lease.gpu.visible_as for lease in leases),
        INDEX_ENV: ",".join(lease.gpu.index for lease in leases),
        UUID_ENV: ",".join(lease.gpu.uuid for lease in leases),
        FDS_ENV: ",".join(str(lease.fd) for lease in leases),
    })
    return env


def job_environment(lease: Lease, cores: list[int], foreign: str) -> dict[str, str]:
    """The variables a leased job runs with."""
    return {
        "CUDA_VISIBLE_DEVICES": lease.gpu.visible_as,
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        FD_ENV: str(lease.fd),
        INDEX_ENV: lease.gpu.index,
        UUID_ENV: lease.gpu.uuid,
        SOURCE_ENV: "lease",
        WAITED_ENV: f"{lease.waited_s:.3f}",
        FOREIGN_ENV: foreign,
        CORES_ENV: cores_text(cores),
    }


def unleased_environment(environ=os.environ) -> dict[str, str]:
    """What a job without a lease records: SLURM's GPU as it is, or none."""
    source = "slurm" if under_slurm(environ) else "none"
    visible = environ.get("CUDA_VISIBLE_DEVICES", "")
    uuid = ""
    if source == "slurm" and visible:
        rows = _nvidia_smi("--query-gpu=index,uuid")
        uuid = rows[0][1] if len(rows) == 1 and len(rows[0]) >= 2 else ""
    return {
        INDEX_ENV: visible,
        UUID_ENV: uuid,
        SOURCE_ENV: source,
        WAITED_ENV: "0",
        FOREIGN_ENV: "",
        CORES_ENV: cores_text(sorted(os.sched_getaffinity(0))),
    }


def holds_lease(environ=os.environ) -> bool:
    """Whether this process really holds the lease its environment names.

    The variables reach every descendant of a job, but the lock's file only
    those it was handed to: the file descriptor must be open, be that lock
    file, and be locked by this open file (flock on it again succeeds).
    """
    try:
        fd = int(environ[FD_ENV])
        held, named = os.fstat(fd), os.stat(environ[LOCK_ENV])
    except (KeyError, ValueError, OSError):
        return False
    if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def run_leased(command: list[str], environ=os.environ, log=sys.stderr) -> None:
    """Lease a GPU (or not: SLURM, no GPU, already leased), then exec `command` holding it."""
    if holds_lease(environ):
        # A job's own child (nsys's program): it holds its parent's lease already.
        os.execvpe(command[0], command, dict(environ))
    # What a parent's lease left in the environment does not hold here.
    env = {k: v for k, v in environ.items() if not k.startswith(LEASE_VARIABLES)}
    pin = pinning_wanted(environ)  # said here when it is neither on nor off, leased or not
    if environ.get(DEVICE_ENV) == "cpu" and not environ.get(GPUS_ENV):
        # A run on the CPU (device: cpu) needs no GPU, unless told to lease (the tests' fake GPUs).
        env.update(unleased_environment(env))
    elif under_slurm(environ) or gpu_count(environ) == 0:
        # SLURM's one GPU as it is; a job that asks for none (gpu=0: Gloo on the host's CPUs).
        env.update(unleased_environment(env))
    else:
        listed = gpus_of(_nvidia_smi(GPU_QUERY))
        gpus = pool(environ, listed)
        if not gpus:
            env.update(unleased_environment(env))
        else:
            lease_dir = lease_dir_of(environ)
            count = gpu_count(environ)
            leases = acquire_many(gpus, lease_dir, " ".join(command)[:300], count, log=log)
            lease = leases[0]
            cores = allowed = sorted(os.sched_getaffinity(0))
            if pin and count == 1:
                cores = cores_for(lease.gpu, lease.slot, gpus, listed, allowed)
            if cores:
                os.sched_setaffinity(0, cores)
            seen = (foreign_processes(held.gpu, ours={os.getpid()}) for held in leases)
            foreign = "; ".join(text for text in seen if text)
            env.update(group_environment(leases, cores, foreign) if count > 1
                       else job_environment(lease, cores, foreign))
            env[LOCK_ENV] = str(lease_dir / lease.gpu.lock_name)
            for held in leases:
                os.set_inheritable(held.fd, True)
            print(
                f"gpu lease: GPU {', '.join(f'{x.gpu.index} {x.gpu.uuid}'.strip() for x in leases)} "
                f"(waited {lease.waited_s:.1f} s), "
                f"CPU cores {cores_text(cores)}" + (f"; also on it, not ours: {foreign}" if foreign else ""),
                file=log, flush=True,
            )
    # The time the job started measuring from: its imports are what follows.
    env[LEASED_AT_ENV] = f"{time.time():.3f}"
    if job_server.wanted(command, env):
        since_start = seconds_since_process_start()
        started_at = time.time() - (since_start if since_start == since_start else 0.0)
        fds = _job_fds(env)
        try:
            sys.exit(job_server.run(command, env, started_at, fds, log=log))
        except job_server.ServerUnavailable as error:
            print(f"job server: {error}; the job runs as a process of its own", file=log, flush=True)
    exec_watched(command, env, job_fds=_job_fds(env))


def _job_fds(env: dict[str, str]) -> tuple[int, ...]:
    """The lock descriptors the job holds: every GPU's where it leased several."""
    if FDS_ENV in env:
        return tuple(int(fd) for fd in env[FDS_ENV].split(","))
    return (int(env[FD_ENV]),) if FD_ENV in env else ()
