"""The cost section, the study's own cost: where this run's time went, by section, rule and phase.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import time

import pandas as pd

from lmstudy.analyse.study_cost import PHASE_COLUMNS, REPETITION_COLUMNS, gpu_identity, most_at_once
from lmstudy.report.contract import wording
from lmstudy.report.coverage import column, recorded
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.sections.cost.tables import _leased, _shares, _text, by_section, phase_names, waited_column

# A job: the key of the rows behind a finding.
KEY = ("section", "rule", "job")


_say = wording(__name__)


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
    measured = measuring["wall_s"].sum()
    return [
        Finding(
            _say(
                "total",
                jobs=len(frame),
                seconds=total,
                minutes=total / 60,
                measuring=len(measuring),
                measured=measured,
                percent=100 * measured / total,
            ),
            rows_behind(frame, "measuring", "wall_s", key=KEY),
        )
    ]


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
    return [
        Finding(
            _say("phases", parts=[(phase_names(frame)[c], 100 * s) for c, s in parts if s >= 0.005]),
            rows_behind(measuring, "wall_s", *PHASE_COLUMNS, "other_s", key=KEY),
        )
    ]


@finds
def _costliest_section(frame: pd.DataFrame) -> list[Finding]:
    """The section with the most job-seconds: every section's seconds and share of the run."""
    if not _timed(frame):
        return []
    total = frame["wall_s"].sum()
    sections = by_section(frame)["wall_s"]
    top = sections.idxmax()
    return [
        Finding(
            _say("costliest_section", name=top, seconds=sections[top], percent=100 * sections[top] / total),
            sections.rename_axis("section").to_frame().assign(share_of_run=sections / total),
        )
    ]


@finds
def _slowest_job(frame: pd.DataFrame) -> list[Finding]:
    if not _timed(frame):
        return []
    worst = frame.loc[[frame["wall_s"].idxmax()]]
    job = worst.iloc[0]
    return [
        Finding(
            _say("slowest_job", rule=job["rule"], job=job["job"], seconds=job["wall_s"]),
            rows_behind(worst, "wall_s", key=KEY),
        )
    ]


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
    return [
        Finding(
            _say("timing_share", percent=100 * share), rows_behind(timing, "wall_s", "measure_s", key=KEY)
        )
    ]


def findings(frame: pd.DataFrame) -> list[Finding]:
    """Where the run's time went: in all, by phase, by section, the slowest job, the timing jobs."""
    if not _timed(frame):
        return []
    return gather(
        _total(frame), _phases(frame), _costliest_section(frame), _slowest_job(frame), _timing_share(frame)
    )


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
    return [
        Finding(
            _say(
                "repetition_cost",
                repeat=repeat,
                percent=100 * repeat / total,
                least=repeat - noise,
                noise=noise,
                rounds=int(noisy["noise_rounds"].sum()),
                noisy=len(noisy),
                jobs=len(jobs),
                once=(total - repeat) / 60,
                run=total / 60,
            ),
            rows_behind(
                jobs, "wall_s", "rounds", "noise_rounds", "repeat_s", "noise_repeat_s", key=KEY
            ).assign(run_wall_s=total),
        )
    ]


@finds
def _extra_rounds(frame: pd.DataFrame) -> list[Finding]:
    """Which sections the rounds that noise asked for went to: the jobs that ran them."""
    jobs = _repeating(frame)
    noisy = jobs[jobs["noise_repeat_s"] > 0] if len(jobs) else jobs
    if not len(noisy):
        return []
    by_section = noisy.groupby("section")["noise_repeat_s"].sum().sort_values(ascending=False)
    return [
        Finding(
            _say("extra_rounds", sections=list(by_section.items())),
            rows_behind(noisy, "noise_rounds", "noise_repeat_s", key=KEY),
        )
    ]


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
        .agg(
            index=("index", "first"),
            start=("started_at", "min"),
            end=("ended_at", "max"),
            jobs=("job", "size"),
            seconds=("wall_s", "sum"),
        )
        .sort_values("start")
    )
    # A GPU's index names it, unless two machines' GPUs share one (both a GPU 0).
    shared = parts["index"].duplicated(keep=False)
    parts["name"] = parts["index"].where(~shared, parts["index"] + " (" + parts.index.str[:12] + ")")
    starts, ends = parts["start"].to_numpy(), parts["end"].to_numpy()
    behind = rows_behind(jobs, "gpu", "gpu_index", "started_at", "ended_at", "wall_s", key=KEY).assign(
        held_s=jobs["ended_at"] - jobs["started_at"]
    )
    if len(parts) > 1 and (starts[1:] >= ends[:-1]).all():
        shown = [
            {
                "name": row.name,
                "jobs": row.jobs,
                "seconds": row.seconds,
                "start": _clock(row.start),
                "end": _clock(row.end),
            }
            for row in parts.itertuples()
        ]
        return [Finding(_say("in_parts", parts=shown, at_once=at_once), behind)]
    numeric = parts["index"].str.isdigit()
    ordered = parts.assign(number=pd.to_numeric(parts["index"].where(numeric), errors="coerce"))
    shown = ordered.sort_values(["number", "index", "start"], na_position="last")["name"].tolist()
    span = jobs["ended_at"].max() - jobs["started_at"].min()
    busy = (jobs["ended_at"] - jobs["started_at"]).sum()
    return [
        Finding(
            _say(
                "at_once",
                most=at_once,
                gpus=shown,
                busy=busy,
                span=span,
                average=busy / span if span > 0 else 1,
            ),
            behind,
        )
    ]


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
    return [
        Finding(
            _say("waits", jobs=count, seconds=waited),
            rows_behind(jobs[jobs[column] > 0], "gpu", "gpu_index", column, key=KEY),
        )
    ]


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
    shown = foreign.head(5)
    # The processes as the job recorded them, their own spacing kept (the template's lines are joined by
    # single spaces): placeholders in the sentence, replaced once it is said.
    text = _say(
        "foreign",
        jobs=len(foreign),
        shown=[(row["job"], row["gpu_index"], f"\x00{i}\x00") for i, (_, row) in enumerate(shown.iterrows())],
    )
    for i, processes in enumerate(shown["foreign_processes"]):
        text = text.replace(f"\x00{i}\x00", processes)
    return [Finding(text, rows_behind(foreign, "gpu", "gpu_index", "foreign_processes", key=KEY))]


def concurrency_findings(frame: pd.DataFrame) -> list[Finding]:
    """How many measuring jobs ran at once, on how many GPUs; waits; GPUs shared with others."""
    return gather(_at_once(frame), _waits(frame), _foreign(frame))


# Declared in the section's contract: each writes one kind of finding with the rows behind it, in the
# report's order (findings, then repetition_findings, then concurrency_findings).
FINDINGS = (
    _total,
    _phases,
    _costliest_section,
    _slowest_job,
    _timing_share,
    _repetition_cost,
    _extra_rounds,
    _at_once,
    _waits,
    _foreign,
)
