"""The user-code lines that made allocations, and the largest allocations.

A snapshot recorded with ``stacks="python"`` gives every allocation the
Python frames that made it, innermost first. Frames of the interpreter,
PyTorch and other installed packages are dropped; what stays is this
project's code (or the user's script), shown relative to the project.
"""

from __future__ import annotations

import linecache
import re
from collections import defaultdict
from pathlib import Path

from lmstudy.analyse.memory.snapshot import Allocation

_LIBRARY = re.compile(r"(site-packages|dist-packages|/lib/python\d|/torch/|^<)")
_PROJECT_DIRS = ("lmstudy/", "scripts/", "tools/", "tests/")


def is_user_frame(frame: dict) -> bool:
    return not _LIBRARY.search(frame.get("filename", ""))


def short_path(filename: str) -> str:
    """`/any/checkout/lmstudy/measure/model.py` -> `lmstudy/measure/model.py`."""
    for top in _PROJECT_DIRS:
        at = filename.rfind("/" + top)
        if at >= 0:
            return filename[at + 1 :]
        if filename.startswith(top):
            return filename
    return filename.rsplit("/", 1)[-1]


def user_frames(frames: list[dict], depth: int = 4) -> list[str]:
    """Up to `depth` user frames, innermost first, as `path:line (function)`."""
    shown = [f"{short_path(f['filename'])}:{f['line']} ({f['name']})" for f in frames if is_user_frame(f)]
    return shown[:depth]


def source_code(frame: dict) -> str:
    """The code at a user frame's line: the operation that made the block (`scores = q @ k...`).

    Read as text where the file is (the analysis runs where the snapshot was taken), else from
    this project's file of the same relative path; "" where neither has the line.
    """
    filename, line = frame.get("filename", ""), int(frame.get("line", 0) or 0)
    if line <= 0:
        return ""
    text = linecache.getline(filename, line) if Path(filename).is_file() else ""
    if not text:
        from lmstudy.environment import REPO_ROOT

        local = Path(REPO_ROOT) / short_path(filename)
        text = linecache.getline(str(local), line) if local.is_file() else ""
    return " ".join(text.split())


# A C++ frame of an autograd node's apply: the backward operation that allocated the block.
_AUTOGRAD = re.compile(r"\b(\w+Backward\d*)\b")


def autograd_operation(frames: list[dict]) -> str:
    """The autograd operation (MmBackward0, SoftmaxBackward0, ...) among an allocation's C++
    frames, innermost first; "" where the snapshot has none (stacks="python" records no C++)."""
    for frame in frames:
        found = _AUTOGRAD.search(frame.get("name", ""))
        if found:
            return found.group(1)
    return ""


def largest(
    allocations: list[Allocation],
    labels: list[str],
    kinds: dict[int, str],
    top: int = 10,
    depth: int = 4,
) -> list[dict]:
    """The largest allocations made during the recording, grouped by size and source.

    One source line often makes the same allocation once per layer; those
    become one row with their count. Ordered by size, then by count.
    """
    groups: dict[tuple, dict] = defaultdict(lambda: {"count": 0, "phases": set(), "kinds": set()})
    for a in allocations:
        if a.alloc_index is None:
            continue
        frames = user_frames(a.alloc_frames, depth)
        key = (a.size, tuple(frames))
        group = groups[key]
        group["count"] += 1
        group["phases"].add(labels[a.alloc_index])
        group["kinds"].add(kinds[id(a)])
        group["requested"] = a.requested
        if "code" not in group:
            user = [f for f in a.alloc_frames if is_user_frame(f)]
            backward = autograd_operation(a.alloc_frames)
            group["code"] = source_code(user[0]) if user else (f"autograd {backward}" if backward else "")
    rows = []
    for (size, frames), group in groups.items():
        rows.append(
            {
                "size_bytes": size,
                "requested_bytes": group["requested"],
                "count": group["count"],
                "total_bytes": size * group["count"],
                "phases": ", ".join(sorted(group["phases"])),
                "kinds": ", ".join(sorted(group["kinds"])),
                "source": frames[0] if frames else "(no Python frame: made by C++, e.g. autograd)",
                "stack": " <- ".join(frames),
                "code": group.get("code", ""),
            }
        )
    rows.sort(key=lambda r: (-r["size_bytes"], -r["count"], r["source"]))
    return rows[:top]
