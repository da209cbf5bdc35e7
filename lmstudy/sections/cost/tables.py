"""The cost section, the study's own cost: where this run's time went, by section, rule and phase.

The functions that compute its tables (pandas only).
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.study_cost import PHASE_COLUMNS, gpu_identity
from lmstudy.registry import NAMES
from lmstudy.report import coverage

SHORT = {
    "wait_s": "GPU lease",
    "imports_s": "imports", "model_imports_s": "model's imports", "count_s": "counting",
    "start_s": "process start", "build_s": "model builds",
    "compile_s": "compiling", "measure_s": "measuring", "profile_s": "profiler",
    "other_s": "other",
}


# On a run without GPU leases (a CPU run) the wait phase is only the wrapper's start.
NO_LEASE = {"wait_s": "job wrapper"}


def phase_names(frame: pd.DataFrame) -> dict[str, str]:
    """SHORT, with the lease phase named for what it was: a run where no job took a GPU lease
    (a CPU run) gets no GPU wording."""
    if "gpu_chosen_by" not in frame:
        return SHORT
    # "none": the job recorded that it took no lease; "" is a record from before leases.
    chosen = set(frame.loc[frame["measuring"], "gpu_chosen_by"].fillna("").astype(str))
    return {**SHORT, **NO_LEASE} if chosen == {"none"} else SHORT


SECTION_ORDER = [*NAMES, "report"]  # the report's order (the registry's), then the report's own jobs


def _shares(frame: pd.DataFrame) -> dict[str, float]:
    total = frame["wall_s"].sum()
    columns = [*PHASE_COLUMNS, "other_s"]
    return {c: frame[c].sum() / total if total else float("nan") for c in columns}


@computes_table
def by_rule(frame: pd.DataFrame) -> pd.DataFrame:
    """Per section and rule: jobs, seconds, share of the run, and each phase's share."""
    total = frame["wall_s"].sum()
    names = phase_names(frame)
    rows = []
    for (section, rule), part in frame.groupby(["section", "rule"], sort=False):
        row = {
            "section": section, "rule": rule, "jobs": len(part),
            "measures on the device": "yes" if part["measuring"].any() else "no",
            "seconds": part["wall_s"].sum(),
            "share of run %": 100 * part["wall_s"].sum() / total if total else None,
        }
        for column, share in _shares(part).items():
            row[f"{names[column]} %"] = 100 * share
        rows.append(row)
    table = pd.DataFrame(rows)
    order = {s: i for i, s in enumerate(SECTION_ORDER)}
    table["_order"] = table["section"].map(lambda s: order.get(s, len(order)))
    table = table.sort_values(["_order", "seconds"], ascending=[True, False], kind="stable")
    return table.drop(columns="_order").reset_index(drop=True)


def by_section(frame: pd.DataFrame) -> pd.DataFrame:
    """Seconds per section and phase, sections in the report's order."""
    columns = [*PHASE_COLUMNS, "other_s"]
    table = frame.groupby("section")[["wall_s", *columns]].sum()
    order = [s for s in SECTION_ORDER if s in table.index] + [
        s for s in table.index if s not in SECTION_ORDER
    ]
    return table.loc[order]


@computes_table
def slowest(frame: pd.DataFrame, count: int = 10) -> pd.DataFrame:
    top = frame.nlargest(count, "wall_s")
    table = top[["section", "rule", "job", "wall_s"]].rename(columns={"wall_s": "seconds"})
    names = phase_names(frame)
    for column in [*PHASE_COLUMNS, "other_s"]:
        table[f"{names[column]} s"] = top[column]
    return table.reset_index(drop=True)


def _text(values: pd.Series) -> pd.Series:
    """Values as text, "" where missing; a whole number read back as a float (a GPU index: 0.0) as 0."""
    def one(value) -> str:
        if pd.isna(value):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    return values.astype(object).map(one)


def _leased(frame: pd.DataFrame) -> pd.DataFrame:
    """The measuring jobs with a record of where and when they ran (lmstudy.launch.gpu_lease)."""
    if "started_at" not in frame:
        return frame.iloc[0:0]
    return frame[frame["measuring"]].dropna(subset=["started_at", "ended_at"])


def waited_column(jobs: pd.DataFrame) -> str:
    """The seconds a job waited for a GPU another job held: waited_s, or the whole wait phase (wait_s,
    which also counts asking nvidia-smi) in records from before waited_s."""
    return "waited_s" if coverage.column(jobs, "waited_s").notna().any() else "wait_s"


def by_gpu(frame: pd.DataFrame) -> pd.DataFrame:
    """Per GPU the measuring jobs ran on: jobs, their seconds and the seconds they waited for it."""
    jobs = _leased(frame)
    if jobs.empty:
        return pd.DataFrame()
    jobs = jobs.assign(gpu=_text(jobs["gpu_index"]).replace("", "(none)"), identity=gpu_identity(jobs))
    waited = waited_column(jobs)
    keys = ["gpu", "identity"]
    if "host" in jobs and jobs["host"].nunique() > 1:
        keys = ["host", *keys]
    table = jobs.groupby(keys, sort=True).agg(
        uuid=("gpu_uuid", "first"), chosen_by=("gpu_chosen_by", "first"), cpu_cores=("cpu_cores", "first"),
        jobs=("job", "size"), seconds=("wall_s", "sum"), waited_s=(waited, "sum"),
        first=("started_at", "min"),
    )
    table = table.reset_index().sort_values([k for k in keys if k != "identity"] + ["first"], kind="stable")
    table = table.drop(columns=["identity", "first"])
    return table.reset_index(drop=True).rename(columns={
        "gpu": "GPU (index)", "uuid": "UUID", "chosen_by": "chosen by", "cpu_cores": "CPU cores",
        "seconds": "job seconds", "waited_s": "seconds waited for it",
    })
