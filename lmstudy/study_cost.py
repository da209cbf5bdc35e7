"""The study's own cost (section 8): one row per job, from Snakemake's benchmarks.

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

from lmstudy.phases import PHASES
from lmstudy.result_files import damaged, read_json

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


def job_table(benchmarks: list[Path], phases: list[Path]) -> pd.DataFrame:
    """One row per job: section, rule, job, wall_s, measuring, <phase>_s, other_s."""
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
        rows.append(row)
    columns = ["section", "rule", "job", "wall_s", "measuring", *PHASE_COLUMNS, "other_s"]
    return pd.DataFrame(rows, columns=columns)
