"""Section 8, the study's own cost: where this run's time went, by section, rule and phase.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import time

import pandas as pd

from lmstudy.analyse.study_cost import gpu_identity, most_at_once
from lmstudy.report.sections.cost.tables import _leased, _shares, _text, by_section, phase_names


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M", time.gmtime(seconds))


def concurrency_findings(frame: pd.DataFrame) -> list[str]:
    """How many measuring jobs ran at once, on how many GPUs; waits; GPUs shared with others."""
    jobs = _leased(frame)
    if jobs.empty:
        return []
    at_once = most_at_once(jobs)
    jobs = jobs.assign(gpu=gpu_identity(jobs), index=_text(jobs["gpu_index"]))
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
    if len(parts) > 1 and (starts[1:] >= ends[:-1]).all():
        items = [
            f"The run was made in {len(parts)} parts, on {len(parts)} GPUs one after another (different "
            "GPUs or machines; their job seconds add up to the run's): "
            + "; ".join(
                f"GPU {row.name}: {row.jobs} measuring jobs, {row.seconds:.0f} s, "
                f"{_clock(row.start)}–{_clock(row.end)} UTC"
                for row in parts.itertuples()
            )
            + f". Measuring jobs ran at most {at_once} at once."
        ]
    else:
        numeric = parts["index"].str.isdigit()
        ordered = parts.assign(number=pd.to_numeric(parts["index"].where(numeric), errors="coerce"))
        shown = ordered.sort_values(["number", "index", "start"], na_position="last")["name"].tolist()
        gpus = f"{len(parts)} GPU{'s' if len(parts) > 1 else ''}"
        where = f"on {gpus} ({', '.join(shown)})" if len(parts) else "with no GPU named"
        span = jobs["ended_at"].max() - jobs["started_at"].min()
        busy = (jobs["ended_at"] - jobs["started_at"]).sum()
        items = [
            f"Measuring jobs ran at most {at_once} at once, {where}: {busy:.0f} s of measuring jobs "
            f"within {span:.0f} s from the first one's start to the last one's end "
            f"({busy / span if span > 0 else 1:.1f} at a time on average)."
        ]
    column = "waited_s" if "waited_s" in jobs else "wait_s"
    waited = jobs[column].sum()
    # Under half a second in all is the lease's own bookkeeping, not a wait worth a sentence.
    if waited >= 0.5:
        count = int((jobs[column] > 0).sum())
        items.append(
            f"{count} job{'s' if count != 1 else ''} waited {waited:.0f} s in all for a GPU that another job "
            "held (another run on this machine, or more GPU jobs than GPUs)."
        )
    jobs = jobs.assign(gpu_index=jobs["index"], foreign_processes=_text(jobs["foreign_processes"]))
    foreign = jobs[jobs["foreign_processes"] != ""]
    if len(foreign):
        items.append(
            f"{len(foreign)} job(s) shared their GPU with processes not of this study, which may have "
            f"slowed them: " + "; ".join(
                f"{row['job']} on GPU {row['gpu_index']}: {row['foreign_processes']}"
                for _, row in foreign.head(5).iterrows()
            ) + "."
        )
    return items


def findings(frame: pd.DataFrame) -> list[str]:
    if frame.empty or not frame["wall_s"].sum() > 0:
        return []
    total = frame["wall_s"].sum()
    measuring = frame[frame["measuring"]]
    items = [
        f"The run's {len(frame)} jobs took {total:.0f} s ({total / 60:.1f} min) added up; "
        f"the {len(measuring)} jobs that measure on the device took {measuring['wall_s'].sum():.0f} s "
        f"of it ({100 * measuring['wall_s'].sum() / total:.0f}%)."
    ]
    if len(measuring):
        shares = _shares(measuring)
        parts = sorted(shares.items(), key=lambda kv: -kv[1])
        items.append(
            "In the measuring jobs the time went to "
            + ", ".join(f"{phase_names(frame)[c]} {100 * s:.0f}%" for c, s in parts if s >= 0.005)
            + "."
        )
    sections = by_section(frame)["wall_s"]
    top = sections.idxmax()
    items.append(
        f"The costliest section is {top}: {sections[top]:.0f} s, "
        f"{100 * sections[top] / total:.0f}% of the run."
    )
    worst = frame.loc[frame["wall_s"].idxmax()]
    items.append(f"The slowest job is {worst['rule']} {worst['job']} ({worst['wall_s']:.1f} s).")
    timing = measuring[measuring["rule"] == "time_model"]
    if len(timing):
        share = timing["measure_s"].sum() / timing["wall_s"].sum()
        items.append(
            f"Timing jobs spend {100 * share:.0f}% of their wall time measuring (warm-up and timed steps)."
        )
    return items


def repetition_findings(frame: pd.DataFrame) -> list[str]:
    """What measuring in several fresh processes cost: the rounds after each job's first.

    Every configuration gets at least the minimum of processes (config.yaml's
    noise.min_processes); the rounds beyond it ran only because the
    processes disagreed (lmstudy.measure.repeat). Records from before the
    repetition have no rounds: no sentence then.
    """
    if "rounds" not in frame or not (pd.to_numeric(frame["rounds"], errors="coerce") > 0).any():
        return []
    jobs = frame[pd.to_numeric(frame["rounds"], errors="coerce") > 0]
    total, repeat = frame["wall_s"].sum(), jobs["repeat_s"].sum()
    noise = jobs["noise_repeat_s"].sum()
    noisy = jobs[jobs["noise_repeat_s"] > 0]
    items = [
        f"Measuring in several fresh processes cost {repeat:.0f} s, {100 * repeat / total:.0f}% of the "
        f"run: {repeat - noise:.0f} s for the processes every configuration gets at least, and "
        f"{noise:.0f} s for the {int(noisy['noise_rounds'].sum())} extra rounds that "
        f"disagreement between processes asked for, in {len(noisy)} of the {len(jobs)} jobs that "
        f"repeat. Measured once per configuration, the run would have taken about "
        f"{(total - repeat) / 60:.1f} min instead of {total / 60:.1f} min."
    ]
    if len(noisy):
        by_section = noisy.groupby("section")["noise_repeat_s"].sum().sort_values(ascending=False)
        items.append(
            "The extra rounds went to "
            + ", ".join(f"{section} ({seconds:.0f} s)" for section, seconds in by_section.items())
            + "."
        )
    return items

