"""The study's own cost (the cost section): one row per job, from Snakemake's benchmarks.

Each job's wall time is Snakemake's `benchmark:` record of it,
results/<run>/benchmarks/<section>/<rule>/<job>.tsv. A job that measures on
the device also writes <job>.phases.json (lmstudy.phases): the seconds it
spent in each phase. The rest of its wall time ("other") is Snakemake's own
start of the job, writing results and the like.

Torch-free, pandas only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse.result_files import damaged, read_json
from lmstudy.phases import PHASES

PHASE_COLUMNS = [f"{phase}_s" for phase in PHASES]


def _job_of(record: Path, suffix: str) -> tuple[str, str, str]:
    """(section, rule, job) from .../benchmarks/<section>/<rule>/<job><suffix>"""
    return record.parent.parent.name, record.parent.name, record.name.removesuffix(suffix)


def read_benchmark(path: Path) -> float:
    """The wall seconds of Snakemake's benchmark record (its first repeat)."""
    try:
        frame = pd.read_csv(path, sep="\t")
        return float(frame["s"].iloc[0])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, KeyError, IndexError,
            ValueError) as error:
        raise damaged(path, f"not a Snakemake benchmark record: {error}") from None


LEASE_COLUMNS = ["host", "gpu_index", "gpu_uuid", "gpu_chosen_by", "cpu_cores", "foreign_processes",
                 "waited_s", "started_at", "ended_at"]


def _lease_columns(record: dict | None) -> dict:
    """Where and when a measuring job held its GPU (lmstudy.launch.gpu_lease); blank for the others."""
    lease = (record or {}).get("lease") or {}
    return {
        "host": str(lease.get("host", "")),
        "gpu_index": str(lease.get("gpu_index", "")),
        "gpu_uuid": str(lease.get("gpu_uuid", "")),
        "gpu_chosen_by": str(lease.get("chosen_by", "")),
        "cpu_cores": str(lease.get("cpu_cores", "")),
        "foreign_processes": str(lease.get("foreign_processes", "")),
        # While another job held the GPU (the wait_s phase also counts asking nvidia-smi).
        "waited_s": float(lease.get("waited_s") or 0.0),
        # Seconds since the epoch: from the lease (or the process's start) to the record's writing.
        "started_at": lease.get("leased_at"),
        "ended_at": lease.get("ended_at"),
    }


# What repeating across fresh processes cost a job (lmstudy.measure.repeat):
# its rounds of processes, the seconds of every round after the first, and of
# the rounds beyond the minimum, which only noise between processes asks for.
REPETITION_COLUMNS = ["rounds", "noise_rounds", "repeat_s", "noise_repeat_s"]


def repetition_columns(record: dict | None) -> dict:
    """The REPETITION_COLUMNS of a job's phase record (0 for a job measured once)."""
    rounds = [float(s) for s in (record or {}).get("rounds_s") or []]
    least = (record or {}).get("min_processes") or 1
    return {"rounds": len(rounds), "noise_rounds": len(rounds[least:]), "repeat_s": sum(rounds[1:]),
            "noise_repeat_s": sum(rounds[least:])}


def job_table(benchmarks: list[Path], phases: list[Path]) -> pd.DataFrame:
    """One row per job: section, rule, job, wall_s, measuring, <phase>_s, other_s, and the lease's columns."""
    records = {_job_of(path, ".phases.json"): read_json(path) for path in map(Path, phases)}
    rows = []
    for path in map(Path, benchmarks):
        section, rule, job = _job_of(path, ".tsv")
        row = {"section": section, "rule": rule, "job": job, "wall_s": read_benchmark(path)}
        record = records.get((section, rule, job))
        row["measuring"] = record is not None
        spent = (record or {}).get("phases", {})
        for phase, column in zip(PHASES, PHASE_COLUMNS, strict=True):
            row[column] = float(spent.get(phase, 0.0))
        # A job's phases cannot exceed its wall time; rounding may make them.
        row["other_s"] = max(0.0, row["wall_s"] - sum(row[c] for c in PHASE_COLUMNS))
        row.update(repetition_columns(record))
        row.update(_lease_columns(record))
        rows.append(row)
    columns = ["section", "rule", "job", "wall_s", "measuring", *PHASE_COLUMNS, "other_s",
               *REPETITION_COLUMNS, *LEASE_COLUMNS]
    return pd.DataFrame(rows, columns=columns)


def most_at_once(frame: pd.DataFrame) -> int:
    """The most measuring jobs that held the device at the same moment (0 without times)."""
    spans = frame.dropna(subset=["started_at", "ended_at"])
    events = sorted(
        [(t, 1) for t in spans["started_at"]] + [(t, -1) for t in spans["ended_at"]],
        key=lambda event: (event[0], event[1]),  # an end before a start at the same instant
    )
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def gpu_identity(frame: pd.DataFrame) -> pd.Series:
    """Which GPU each job ran on: its UUID, else host and index (two machines can both have a GPU 0)."""
    uuids = frame["gpu_uuid"].fillna("").astype(str) if "gpu_uuid" in frame else pd.Series("", frame.index)
    hosts = frame["host"].fillna("").astype(str) if "host" in frame else ""
    return uuids.where(uuids != "", hosts + ":" + frame["gpu_index"].astype(str))


def overlaps_on_one_gpu(frame: pd.DataFrame) -> pd.DataFrame:
    """Pairs of measuring jobs that held the same GPU at the same time: none, if the lease works."""
    spans = frame.dropna(subset=["started_at", "ended_at"])
    spans = spans[spans["gpu_chosen_by"] == "lease"]
    pairs = []
    for _, jobs in spans.assign(gpu=gpu_identity(spans)).groupby("gpu"):
        jobs = jobs.sort_values("started_at")
        previous = None
        for _, job in jobs.iterrows():
            if previous is not None and job["started_at"] < previous["ended_at"]:
                pairs.append({"gpu_index": job["gpu_index"], "first": previous["job"], "second": job["job"]})
            if previous is None or job["ended_at"] > previous["ended_at"]:
                previous = job
    return pd.DataFrame(pairs, columns=["gpu_index", "first", "second"])


def _measuring_spans(jobs: pd.DataFrame) -> pd.DataFrame:
    if jobs.empty or not {"measuring", "started_at", "ended_at"} <= set(jobs):
        return jobs.iloc[0:0]
    measuring = jobs[jobs["measuring"].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))]
    return measuring.dropna(subset=["started_at", "ended_at"])


def shared_host(results: Path, jobs: pd.DataFrame) -> str:
    """Whether another study measured on this run's host while its measuring jobs ran, from the job
    records of the runs beside it (results/<other>/cost/jobs.csv): on a host-bound step the host's
    load moves the time, so a reader must know. Also the jobs during which other processes held the
    GPU. "" where this run recorded no measuring job."""
    from lmstudy.analyse import result_files

    mine = _measuring_spans(jobs)
    if mine.empty:
        return ""
    hosts = set(mine["host"].dropna().astype(str)) if "host" in mine else set()
    others = {}
    for path in sorted(results.parent.glob("*/cost/jobs.csv")):
        if path.parent.parent.resolve() == results.resolve():
            continue
        try:
            spans = _measuring_spans(result_files.read_csv(path, missing_ok=True))
        except result_files.DamagedResult:
            continue  # another run's damaged records say nothing about this one
        if hosts and "host" in spans:
            spans = spans[spans["host"].astype(str).isin(hosts)]
        if len(spans):
            others[path.parent.parent.name] = spans
    parts = []
    if others:
        overlapped, runs = 0, set()
        for _, job in mine.iterrows():
            hit = [name for name, spans in others.items()
                   if ((spans["started_at"] < job["ended_at"])
                       & (spans["ended_at"] > job["started_at"])).any()]
            overlapped += bool(hit)
            runs.update(hit)
        parts.append(
            f"{overlapped} of {len(mine)} measuring jobs ran while a measuring job of "
            + (f"run {', '.join(sorted(runs))}" if runs else f"the {len(others)} other runs beside it")
            + " ran on the same host" if overlapped else
            f"none of {len(mine)} measuring jobs overlapped a measuring job of the {len(others)} other "
            f"run{'s' if len(others) > 1 else ''} beside it on the same host")
    else:
        parts.append("not known: no other run's job records lie beside this one")
    if "foreign_processes" in mine:
        foreign = mine["foreign_processes"].astype(object).fillna("").astype(str).str.strip()
        busy = int((foreign != "").sum())
        if busy:
            parts.append(f"other processes held the GPU during {busy} of {len(mine)}")
    return "; ".join(parts)
