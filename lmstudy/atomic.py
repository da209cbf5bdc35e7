"""Write result files whole or not at all: write beside, then rename."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path

from lmstudy.errors import UserError

# A full disk, or a full quota: the user frees space and runs again.
FULL = (errno.ENOSPC, errno.EDQUOT)


def no_space_sentence(path=None) -> str:
    where = f" to write {path}" if path else ""
    return (
        f"there is no space left on the device{where}: free some space there "
        "(df -h shows how full each disk is) and run the same command again."
    )


def current_umask() -> int:
    """The process's umask, read without changing it where Linux says it."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: the only portable way is to set it and set it back
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to `path`; rename it over `path` on success.

    A job killed half-way leaves only a hidden temporary file, never a
    truncated result that a later run would take as done.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    # mkstemp creates the file 0600 whatever the umask; a result is for
    # whoever may read the folder (a group, a web server), as with open().
    os.fchmod(fd, 0o666 & ~current_umask())
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except OSError as error:
        if error.errno in FULL:
            raise UserError(no_space_sentence(path)) from None
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_json(path: str | os.PathLike, data) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def csv_text(frame) -> str:
    """A pandas DataFrame as CSV text that pandas reads back as the same table.

    pandas quotes a value holding a newline but not one holding a bare
    carriage return (a kernel's or run's name may), which a reader then takes
    as the end of a row; where a text cell holds one, every text cell is quoted.
    """
    import csv

    def has_return(value) -> bool:
        return isinstance(value, str) and "\r" in value

    # By position: a report table's headers may repeat.
    columns = (frame.iloc[:, i] for i in range(frame.shape[1]))
    # As objects: a categorical column (sizes, passes) maps to a categorical, which has no any().
    quoted = any(c.astype(object).map(has_return).any() for c in columns if c.dtype.kind not in "biufcmM")
    quoted = quoted or any(has_return(str(c)) for c in frame.columns)
    return frame.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC if quoted else csv.QUOTE_MINIMAL)


def write_csv(path: str | os.PathLike, frame) -> None:
    """Write a pandas DataFrame as CSV, atomically, with no cell a spreadsheet would run as a formula.

    The one CSV writer of the project (study and comparison, results and
    report): lmstudy.spreadsheet says why, and how the reader undoes it.
    """
    from lmstudy.spreadsheet import safe_frame

    write_text(path, csv_text(safe_frame(frame)))
