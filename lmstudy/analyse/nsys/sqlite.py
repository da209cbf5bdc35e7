"""Read an Nsight Systems report: its SQLite export, or the .nsys-rep exported first."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pandas as pd

from lmstudy.analyse.nsys.events import Events
from lmstudy.errors import UserError
from lmstudy.ranges import NVTX_DOMAIN

NVTX_PUSH_POP, NVTX_START_END, NVTX_DOMAIN_CREATE = 59, 60, 75
_NEEDED = ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds")
_MEMCPY_KIND = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
}


def export_sqlite(report: Path, nsys: str = "nsys", out: Path | None = None) -> Path:
    """Export an .nsys-rep to SQLite beside it (or at `out`) with `nsys export`."""
    out = out or report.with_suffix(".sqlite")
    command = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out), str(report)]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise UserError(
            f"cannot export {report}: nsys ({nsys}) was not found; pass its path with --nsys "
            "or give the report's .sqlite export instead."
        ) from None
    if done.returncode != 0 or not out.exists():
        raise UserError(
            f"`nsys export` could not read {report} (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-300:]}; check that the file is a complete report."
        )
    return out


def _connect(path: Path) -> sqlite3.Connection:
    """Open an export read-only, never creating it.

    As a URI so that mode=ro holds, and percent-quoted (Path.as_uri) so that
    a '#', '?' or '%' in the path stays part of the path.
    """
    if not path.is_file():
        raise UserError(f"{path} does not exist: give the path of an nsys SQLite export.")
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def read_events(path: Path, domain: str | None = NVTX_DOMAIN, exact: bool = True) -> Events:
    """The ranges, launches and GPU activities of an nsys SQLite export.

    Only ranges of NVTX `domain` are read (None: every domain), so that
    ranges libraries open themselves (CCCL's cub::DeviceRadixSort, say) do
    not stand between the program's ranges and its kernels. Unless `exact`,
    an export without that domain (another program's, whose ranges are in
    the default domain or its own) has the ranges of every domain read
    instead. Either way Events.note says when the domain was not there.
    """
    path = Path(path)
    try:
        con = _connect(path)
        tables = _tables(con)
    except sqlite3.DatabaseError as error:
        raise UserError(
            f"{path} is not an nsys SQLite export ({error}); export it with `nsys export --type sqlite`."
        ) from None
    missing = [t for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds") if t not in tables]
    if missing:
        raise UserError(
            f"{path} has no {', '.join(missing)} table: it is not an nsys export of a CUDA trace; "
            "profile with `nsys profile -t cuda,nvtx`."
        )
    with con:
        ranges, note = _ranges(con, tables, domain, exact)
        launches = pd.read_sql_query(
            "SELECT globalTid AS thread, start, end, correlationId AS correlation "
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME",
            con,
        )
        activities = _activities(con, tables)
    con.close()
    return Events(ranges, launches, activities, source="nsys", note=note)


def _ranges(con, tables, domain, exact=True) -> tuple[pd.DataFrame, str]:
    """The ranges to attribute kernels to, and a note when `domain` was not found."""
    if "NVTX_EVENTS" not in tables:
        return pd.DataFrame(columns=["thread", "name", "start", "end"]), ""
    events = pd.read_sql_query(
        "SELECT e.globalTid AS thread, COALESCE(e.text, s.value) AS name, e.start, e.end, "
        "COALESCE(e.domainId, 0) AS domain_id, e.eventType FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId "
        f"WHERE e.eventType IN ({NVTX_PUSH_POP}, {NVTX_START_END}, {NVTX_DOMAIN_CREATE})",
        con,
    )
    domains = events[events["eventType"] == NVTX_DOMAIN_CREATE].set_index("domain_id")["name"]
    ranges = events[(events["eventType"] != NVTX_DOMAIN_CREATE) & events["end"].notna()].copy()
    note = ""
    if domain is not None:
        ids = domains[domains == domain].index
        mine = ranges["domain_id"].isin(ids)
        if not mine.any() and len(ranges):
            present = sorted({str(domains.get(i, "the default domain")) for i in ranges["domain_id"]})
            if exact:
                note = (
                    f"no ranges in NVTX domain {domain!r} (the export has ranges in: "
                    f"{', '.join(present)}), so no kernel is attributed to a range"
                )
            else:
                note = (
                    f"no ranges in NVTX domain {domain!r}, so the ranges of every domain were read "
                    f"({', '.join(present)}); pass --domain to pick one"
                )
                mine = ranges["domain_id"].notna()
        ranges = ranges[mine]
    ranges["end"] = ranges["end"].astype("int64")
    return ranges, note


def _activities(con, tables) -> pd.DataFrame:
    frames = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        kernels = pd.read_sql_query(
            "SELECT k.correlationId AS correlation, s.value AS name, k.start, k.end "
            "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName",
            con,
        )
        kernels["kind"] = "kernel"
        frames.append(kernels)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        copies = pd.read_sql_query(
            "SELECT correlationId AS correlation, copyKind, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY",
            con,
        )
        copies["name"] = [f"[CUDA memcpy {_MEMCPY_KIND.get(k, 'Other')}]" for k in copies["copyKind"]]
        copies["kind"] = "memcpy"
        frames.append(copies)
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        sets = pd.read_sql_query(
            "SELECT correlationId AS correlation, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET", con
        )
        sets["name"] = "[CUDA memset]"
        sets["kind"] = "memset"
        frames.append(sets)
    if not frames:
        return pd.DataFrame(columns=["correlation", "name", "kind", "start", "end"])
    return pd.concat(frames, ignore_index=True)[["correlation", "name", "kind", "start", "end"]]


def nsys_version_of(path: Path) -> str:
    """The nsys version that wrote an export, where the export records it."""
    con = _connect(Path(path))
    try:
        if "META_DATA_EXPORT" in _tables(con):
            for name, value in con.execute("SELECT name, value FROM META_DATA_EXPORT"):
                if name == "EXPORT_PRODUCT_VERSION":
                    return str(value)
    finally:
        con.close()
    return ""
