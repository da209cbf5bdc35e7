"""Find Nsight Systems and its version. Imports no torch: the Snakefile uses it."""

from __future__ import annotations

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


def resolve_backend(backend: str, executable: str = "nsys") -> str:
    """'auto' becomes 'nsys' where nsys is on hand, else 'torch'."""
    if backend != "auto":
        return backend
    return "nsys" if shutil.which(executable) else "torch"
