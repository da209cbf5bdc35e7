"""Find Nsight Systems and its version. Imports no torch: the Snakefile uses it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path


class NsysMissing(Exception):
    """nsys is not there or does not run; the message names the config key."""


def nsys_version(executable: str = "nsys", key: str = "nsys.executable") -> str:
    """`nsys --version`'s line, or NsysMissing naming the config `key` to fix."""
    path = shutil.which(executable)
    given = Path(executable).expanduser()
    if path is None and os.sep in executable and given.exists():
        # which() skips what it cannot run: say why, rather than "not found".
        what = "a directory" if given.is_dir() else "not executable"
        raise NsysMissing(
            f"{executable!r} exists but is {what}: set `{key}` in config.yaml to the nsys program "
            f"itself{' or make it executable (chmod +x)' if what == 'not executable' else ''}."
        )
    if path is None:
        raise NsysMissing(
            f"Nsight Systems was not found at {executable!r}: set `{key}` in config.yaml to the "
            "nsys program (or set nsys.backend to torch, or nsys.enabled to false)."
        )
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise NsysMissing(
            f"{executable!r} does not run ({error}): set `{key}` in config.yaml to a working nsys."
        ) from None
    out = (done.stdout or done.stderr).strip()
    if done.returncode != 0 or "Nsight Systems" not in out:
        raise NsysMissing(
            f"{executable!r} --version did not answer as Nsight Systems does (exit {done.returncode}): "
            f"set `{key}` in config.yaml to the nsys program."
        )
    return out.splitlines()[0]


GET_NSYS = (
    "To profile with Nsight Systems, install it (https://developer.nvidia.com/nsight-systems; "
    "on a cluster often `module load nsight-systems` or part of the CUDA toolkit) where the jobs run, "
    "put `nsys` on PATH or set nsys.executable in config.yaml to it, then delete {record} and run again."
)


def settle_backend(backend: str, executable: str = "nsys", device: str = "cuda", record: str = "") -> dict:
    """Which profiler the profile jobs use, settled on the machine they run on.

    'nsys' is strict (NsysMissing naming nsys.executable when it does not
    run), 'torch' needs nothing, and 'auto' takes nsys where it runs, else
    torch.profiler, saying why and how to get nsys. On a CPU device 'auto'
    is torch.profiler: Nsight Systems traces CUDA kernels. `record` is the
    file the answer is kept in, named in that advice.
    """
    # executable: as configured, for the profile jobs (on other nodes of the same
    # kind it may sit elsewhere on PATH); path: where this job found it.
    answer = dict(requested=backend, backend=backend, executable="", path="", nsys_version="", note="")
    if backend == "torch":
        return answer
    if backend == "nsys":
        version = nsys_version(executable)
        answer.update(nsys_version=version, executable=executable, path=_found(executable))
        return answer
    if backend != "auto":
        raise ValueError(f"nsys.backend must be nsys, torch or auto, not {backend!r}")
    if device == "cpu":
        answer.update(
            backend="torch",
            note="nsys.backend auto on a CPU device: torch.profiler, as Nsight Systems traces CUDA kernels.",
        )
        return answer
    try:
        version = nsys_version(executable)
    except NsysMissing as error:
        answer.update(
            backend="torch",
            note=f"nsys.backend auto: Nsight Systems is not usable here ({error}), so torch.profiler "
            "profiled the jobs. " + GET_NSYS.format(record=record or "the nsys backend record"),
        )
        return answer
    answer.update(backend="nsys", executable=executable, path=_found(executable), nsys_version=version)
    return answer


def _found(executable: str) -> str:
    return shutil.which(executable) or executable


# The keys the nsys_backend job writes (lmstudy/sections/nsys/products.py requires the same).
ANSWER_KEYS = ("backend", "requested", "executable", "path", "nsys_version", "note")


def read_answer(path: str | Path) -> dict:
    """The nsys_backend job's answer, read by the profile jobs. Read here, not through
    lmstudy.analyse.result_files, so that a profile job's code is nsys's own: an edit of another
    section's result-file checks reruns no profile. A damaged answer is said as result_files says it."""
    from lmstudy.errors import UserError, damaged_sentence

    def damaged(what: str) -> UserError:
        return UserError(damaged_sentence(path, what, "the nsys_backend job writes it"))

    try:
        answer = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path} does not exist: run snakemake again to make it.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise damaged(f"not valid JSON: {error}") from None
    if not isinstance(answer, dict):
        raise damaged(f"it holds a JSON {type(answer).__name__}, not an object")
    missing = [k for k in ANSWER_KEYS if k not in answer]
    if missing:
        raise damaged(f"no {', '.join(missing)}")
    return answer


def describe(answer: dict) -> str:
    """One line for the logs: which backend runs, and why."""
    which = "Nsight Systems" if answer["backend"] == "nsys" else "torch.profiler"
    line = f"profiling backend: {answer['backend']} ({which}"
    line += f", {answer['path']}: {answer['nsys_version']})" if answer["backend"] == "nsys" else ")"
    line += f"; requested: {answer['requested']}"
    return line + (f". {answer['note']}" if answer["note"] else "")
