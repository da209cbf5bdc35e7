"""Open any profile the section reads: .nsys-rep, its .sqlite, or a torch.profiler trace."""

from __future__ import annotations

from pathlib import Path

from lmstudy.analyse.nsys.events import Events
from lmstudy.errors import UserError
from lmstudy.ranges import NVTX_DOMAIN


def read_profile(
    path: Path, nsys: str = "nsys", domain: str | None = NVTX_DOMAIN, exact: bool = True
) -> Events:
    """The events of a profile; `domain` and `exact` as lmstudy.analyse.nsys.sqlite.read_events has them."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} does not exist: give the path of an .nsys-rep, .sqlite or trace .json(.gz).")
    name = path.name
    if name.endswith((".json", ".json.gz")):
        from lmstudy.analyse.nsys import torch_trace

        return torch_trace.read_events(path)
    from lmstudy.analyse.nsys import sqlite

    if name.endswith(".nsys-rep"):
        export = path.with_suffix(".sqlite")
        if not export.exists() or export.stat().st_mtime < path.stat().st_mtime:
            sqlite.export_sqlite(path, nsys, export)
        path = export
    elif not name.endswith((".sqlite", ".db")):
        raise UserError(
            f"{path}: give an .nsys-rep, its .sqlite export, or a torch.profiler .json(.gz) trace."
        )
    return sqlite.read_events(path, domain=domain, exact=exact)
