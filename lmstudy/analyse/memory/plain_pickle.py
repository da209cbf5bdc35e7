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


class TooLarge(Exception):
    """The pickle stands for far more data, or nests far deeper, than any snapshot; the message says which."""


# A pickle refers to an object it has built already in a few bytes (a memo
# reference), so a file of a few MB can describe billions of values. A real
# snapshot holds about one value per byte of its file (the fixtures: 0.5 to
# 1.2), and nests 7 deep (segments, blocks, frames); anything far beyond either
# is refused while it is being walked, before any analysis, in bounded time.
VALUES_PER_BYTE = 8
BASE_VALUES = 100_000
MAX_DEPTH = 32
# Far above the largest snapshot the study writes (memory.max_entries events with their stacks).
MAX_BYTES = 4 << 30


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        # Never import: naming a global is how a pickle runs code.
        raise NotPlainData(f"it asks for {module}.{name}, and only plain data is read")

    def persistent_load(self, pid):
        raise NotPlainData("it refers to an outside object (persistent id), and only plain data is read")


def _check_plain(data, max_values: int) -> None:
    """Raise NotPlainData if anything inside `data` is not a plain type, TooLarge if it is too big.

    Every use of a shared object counts, as the analysis would visit it each time.
    """
    stack, count = [(data, 0)], 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_values:
            raise TooLarge(f"it stands for more than {max_values} values, far more than its size holds")
        if depth > MAX_DEPTH:
            raise TooLarge(f"it nests more than {MAX_DEPTH} levels deep")
        if type(item) not in PLAIN:
            raise NotPlainData(f"it holds a {type(item).__name__}, and only plain data is read")
        if isinstance(item, dict):
            stack.extend((key, depth + 1) for key in item)
            stack.extend((value, depth + 1) for value in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((value, depth + 1) for value in item)


def loads(payload: bytes):
    """The plain data in `payload`; NotPlainData, TooLarge or pickle.UnpicklingError otherwise."""
    data = _PlainUnpickler(io.BytesIO(payload)).load()
    _check_plain(data, VALUES_PER_BYTE * len(payload) + BASE_VALUES)
    return data


def load(path: str | Path):
    """The plain data in the pickle file at `path` (see `loads`)."""
    size = Path(path).stat().st_size
    if size > MAX_BYTES:
        raise TooLarge(f"it is {size} bytes, more than any snapshot the study writes ({MAX_BYTES})")
    return loads(Path(path).read_bytes())
