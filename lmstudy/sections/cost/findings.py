"""The cost section, the study's own cost: where this run's time went, by section, rule and phase.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import time

import pandas as pd

from lmstudy.analyse.study_cost import PHASE_COLUMNS, REPETITION_COLUMNS, gpu_identity, most_at_once
from lmstudy.report.coverage import column, recorded
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.sections.cost.tables import _leased, _shares, _text, by_section, phase_names, waited_column

# A job: the key of the rows behind a finding.
KEY = ("section", "rule", "job")


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M", time.gmtime(seconds))


def _timed(frame: pd.DataFrame) -> bool:
    """Whether the records have any time to tell of."""
    return not frame.empty and frame["wall_s"].sum() > 0


@finds
def _total(frame: pd.DataFrame) -> list[Finding]:
    """The run's job-seconds and the measuring jobs' share: every job's wall time."""
    if not _timed(frame):
        return []
    total = frame["wall_s"].sum()
    measuring = frame[frame["measuring"]]
    return [Finding(
        f"The run's {len(frame)} jobs took {total:.0f} s ({total / 60:.1f} min) added up; "
        f"the {len(measuring)} jobs that measure on the device took {measuring['wall_s'].sum():.0f} s "
        f"of it ({100 * measuring['wall_s'].sum() / total:.0f}%).",
        rows_behind(frame, "measuring", "wall_s", key=KEY))]


@finds
def _phases(frame: pd.DataFrame) -> list[Finding]:
    """Where the measuring jobs' time went: their phases' seconds, each job's."""
    if not _timed(frame):
        return []
    measuring = frame[frame["measuring"]]
    if not len(measuring):
        return []
    shares = _shares(measuring)
    parts = sorted(shares.items(), key=lambda kv: -kv[1])
    return [Finding(
        "In the measuring jobs the time went to "
        + ", ".join(f"{phase_names(frame)[c]} {100 * s:.0f}%" for c, s in parts if s >= 0.005)
        + ".", rows_behind(measuring, "wall_s", *PHASE_COLUMNS, "other_s", key=KEY))]


@finds
def _costliest_section(frame: pd.DataFrame) -> list[Finding]:
    """The section with the most job-seconds: every section's seconds and share of the run."""
    if not _timed(frame):
        return []
    total = frame["wall_s"].sum()
    sections = by_section(frame)["wall_s"]
    top = sections.idxmax()
    return [Finding(
        f"The costliest section is {top}: {sections[top]:.0f} s, "
        f"{100 * sections[top] / total:.0f}% of the run.",
        sections.rename_axis("section").to_frame().assign(share_of_run=sections / total))]


@finds
def _slowest_job(frame: pd.DataFrame) -> list[Finding]:
    if not _timed(frame):
        return []
    worst = frame.loc[[frame["wall_s"].idxmax()]]
    job = worst.iloc[0]
    return [Finding(f"The slowest job is {job['rule']} {job['job']} ({job['wall_s']:.1f} s).",
                    rows_behind(worst, "wall_s", key=KEY))]


@finds
def _timing_share(frame: pd.DataFrame) -> list[Finding]:
    """The timing jobs' share of wall time spent measuring: their wall and measuring seconds."""
    if not _timed(frame):
        return []
    measuring = frame[frame["measuring"]]
    timing = measuring[measuring["rule"] == "time_model"]
    if not len(timing):
        return []
    share = timing["measure_s"].sum() / timing["wall_s"].sum()
    return [Finding(
        f"Timing jobs spend {100 * share:.0f}% of their wall time measuring (warm-up and timed steps).",
        rows_behind(timing, "wall_s", "measure_s", key=KEY))]


def findings(frame: pd.DataFrame) -> list[Finding]:
    """Where the run's time went: in all, by phase, by section, the slowest job, the timing jobs."""
    if not _timed(frame):
        return []
    return gather(_total(frame), _phases(frame), _costliest_section(frame), _slowest_job(frame),
                  _timing_share(frame))


def _repeating(frame: pd.DataFrame) -> pd.DataFrame:
    """The jobs that measured in more than one round, with every one of their repetition's columns
    recorded (none in records from before the repetition)."""
    for name in REPETITION_COLUMNS:
        frame = recorded(frame, name)
    return frame[pd.to_numeric(column(frame, "rounds"), errors="coerce") > 0]


@finds
def _repetition_cost(frame: pd.DataFrame) -> list[Finding]:
    """What the rounds after each job's first cost, the minimum's and the noise's: the jobs that repeat,
    beside the run's total seconds."""
    jobs = _repeating(frame)
    if jobs.empty:
        return []
    total, repeat = frame["wall_s"].sum(), jobs["repeat_s"].sum()
    noise = jobs["noise_repeat_s"].sum()
    noisy = jobs[jobs["noise_repeat_s"] > 0]
    return [Finding(
        f"Measuring in several fresh processes cost {repeat:.0f} s, {100 * repeat / total:.0f}% of the "
        f"run: {repeat - noise:.0f} s for the processes every configuration gets at least, and "
        f"{noise:.0f} s for the {int(noisy['noise_rounds'].sum())} extra rounds that "
        f"disagreement between processes asked for, in {len(noisy)} of the {len(jobs)} jobs that "
        f"repeat. Measured once per configuration, the run would have taken about "
        f"{(total - repeat) / 60:.1f} min instead of {total / 60:.1f} min.",
        rows_behind(jobs, "wall_s", "rounds", "noise_rounds", "repeat_s", "noise_repeat_s", key=KEY).assign(
            run_wall_s=total))]


@finds
def _extra_rounds(frame: pd.DataFrame) -> list[Finding]:
    """Which sections the rounds that noise asked for went to: the jobs that ran them."""
    jobs = _repeating(frame)
    noisy = jobs[jobs["noise_repeat_s"] > 0] if len(jobs) else jobs
    if not len(noisy):
        return []
    by_section = noisy.groupby("section")["noise_repeat_s"].sum().sort_values(ascending=False)
    return [Finding(
        "The extra rounds went to "
        + ", ".join(f"{section} ({seconds:.0f} s)" for section, seconds in by_section.items())
        + ".", rows_behind(noisy, "noise_rounds", "noise_repeat_s", key=KEY))]


def repetition_findings(frame: pd.DataFrame) -> list[Finding]:
    """What measuring in several fresh processes cost: the rounds after each job's first.

    Every configuration gets at least the minimum of processes (config.yaml's
    noise.min_processes); the rounds beyond it ran only because the
    processes disagreed (lmstudy.measure.repeat). Records from before the
    repetition have no rounds: no sentence then.
    """
    return gather(_repetition_cost(frame), _extra_rounds(frame))


def _leased_jobs(frame: pd.DataFrame) -> pd.DataFrame:
    """The measuring jobs with a record of where and when they ran, each with its GPU named (gpu: its
    identity; index and gpu_index: its index as the sentences write it)."""
    jobs = _leased(frame)
    if jobs.empty:
        return jobs
    jobs = jobs.assign(gpu=gpu_identity(jobs), index=_text(jobs["gpu_index"]))
    return jobs.assign(gpu_index=jobs["index"])


@finds
def _at_once(frame: pd.DataFrame) -> list[Finding]:
    """How many measuring jobs ran at once, on how many GPUs (or in parts one after another): the jobs'
    spans and GPUs, with the seconds each held one."""
    jobs = _leased_jobs(frame)
    if jobs.empty:
        return []
    at_once = most_at_once(jobs)
    parts = (
        jobs[jobs["index"] != ""]
        .groupby("gpu")
        .agg(index=("index", "first"), start=("started_at", "min"), end=("ended_at", "max"),
             jobs=("job", "size"), seconds=("wall_s", "sum"))
        .sort_values("start")
    )
    # A GPU's index names it, unless two machines' GPUs share one (both a GPU 0).
    shared = parts["index"].duplicated(keep=False)
    parts["name"] = parts["index"].where(~shared, parts["index"] + " (" + parts.index.str[:12] + ")")
    starts, ends = parts["start"].to_numpy(), parts["end"].to_numpy()
    behind = rows_behind(jobs, "gpu", "gpu_index", "started_at", "ended_at", "wall_s", key=KEY).assign(
        held_s=jobs["ended_at"] - jobs["started_at"])
    if len(parts) > 1 and (starts[1:] >= ends[:-1]).all():
        return [Finding(
            f"The run was made in {len(parts)} parts, on {len(parts)} GPUs one after another (different "
            "GPUs or machines; their job seconds add up to the run's): "
            + "; ".join(
                f"GPU {row.name}: {row.jobs} measuring jobs, {row.seconds:.0f} s, "
                f"{_clock(row.start)}–{_clock(row.end)} UTC"
                for row in parts.itertuples()
            )
            + f". Measuring jobs ran at most {at_once} at once.", behind)]
    numeric = parts["index"].str.isdigit()
    ordered = parts.assign(number=pd.to_numeric(parts["index"].where(numeric), errors="coerce"))
    shown = ordered.sort_values(["number", "index", "start"], na_position="last")["name"].tolist()
    gpus = f"{len(parts)} GPU{'s' if len(parts) > 1 else ''}"
    where = f"on {gpus} ({', '.join(shown)})" if len(parts) else "with no GPU named"
    span = jobs["ended_at"].max() - jobs["started_at"].min()
    busy = (jobs["ended_at"] - jobs["started_at"]).sum()
    return [Finding(
        f"Measuring jobs ran at most {at_once} at once, {where}: {busy:.0f} s of measuring jobs "
        f"within {span:.0f} s from the first one's start to the last one's end "
        f"({busy / span if span > 0 else 1:.1f} at a time on average).", behind)]


@finds
def _waits(frame: pd.DataFrame) -> list[Finding]:
    """The seconds measuring jobs waited for a GPU another job held: the jobs that waited."""
    jobs = _leased_jobs(frame)
    if jobs.empty:
        return []
    column = waited_column(jobs)
    waited = jobs[column].sum()
    # Under half a second in all is the lease's own bookkeeping, not a wait worth a sentence.
    if waited < 0.5:
        return []
    count = int((jobs[column] > 0).sum())
    return [Finding(
        f"{count} job{'s' if count != 1 else ''} waited {waited:.0f} s in all for a GPU that another job "
        "held (another run on this machine, or more GPU jobs than GPUs).",
        rows_behind(jobs[jobs[column] > 0], "gpu", "gpu_index", column, key=KEY))]


@finds
def _foreign(frame: pd.DataFrame) -> list[Finding]:
    """The measuring jobs that shared their GPU with processes not of this study, and those processes."""
    jobs = _leased_jobs(frame)
    if jobs.empty:
        return []
    jobs = jobs.assign(foreign_processes=_text(jobs["foreign_processes"]))
    foreign = jobs[jobs["foreign_processes"] != ""]
    if not len(foreign):
        return []
    return [Finding(
        f"{len(foreign)} job(s) shared their GPU with processes not of this study, which may have "
        f"slowed them: " + "; ".join(
            f"{row['job']} on GPU {row['gpu_index']}: {row['foreign_processes']}"
            for _, row in foreign.head(5).iterrows()
        ) + ".", rows_behind(foreign, "gpu", "gpu_index", "foreign_processes", key=KEY))]


def concurrency_findings(frame: pd.DataFrame) -> list[Finding]:
    """How many measuring jobs ran at once, on how many GPUs; waits; GPUs shared with others."""
    return gather(_at_once(frame), _waits(frame), _foreign(frame))


# Declared in the section's contract: each writes one kind of finding with the rows behind it, in the
# report's order (findings, then repetition_findings, then concurrency_findings).
FINDINGS = (_total, _phases, _costliest_section, _slowest_job, _timing_share, _repetition_cost, _extra_rounds,
            _at_once, _waits, _foreign)
