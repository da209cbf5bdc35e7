"""Read a pickle that must hold plain data only, never run what it names.

A memory snapshot comes from another machine or person: it is data, never
code. Plain unpickling calls whatever the file names (os.system, say), so
this unpickler resolves no global at all: every class or function a pickle
asks for is refused. What it can build then is dicts, lists, tuples, str,
bytes, numbers, bool and None, plus sets and bytearrays, which the check
after loading refuses too, so a snapshot is exactly the plain data
torch.cuda.memory._dump_snapshot writes.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

PLAIN = (dict, list, tuple, str, bytes, int, float, bool, type(None))


class NotPlainData(Exception):
    """The pickle asks for something other than plain data; the message says what."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        # Never import: naming a global is how a pickle runs code.
        raise NotPlainData(f"it asks for {module}.{name}, and only plain data is read")

    def persistent_load(self, pid):
        raise NotPlainData("it refers to an outside object (persistent id), and only plain data is read")


def _check_plain(data) -> None:
    """Raise NotPlainData if anything inside `data` is not a plain type."""
    stack, seen = [data], set()
    while stack:
        item = stack.pop()
        if type(item) not in PLAIN:
            raise NotPlainData(f"it holds a {type(item).__name__}, and only plain data is read")
        if isinstance(item, (dict, list, tuple)) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.keys() if isinstance(item, dict) else ())
            stack.extend(item.values() if isinstance(item, dict) else item)


def loads(payload: bytes):
    """The plain data in `payload`; NotPlainData or pickle.UnpicklingError otherwise."""
    data = _PlainUnpickler(io.BytesIO(payload)).load()
    _check_plain(data)
    return data


def load(path: str | Path):
    """The plain data in the pickle file at `path` (see `loads`)."""
    return loads(Path(path).read_bytes())
