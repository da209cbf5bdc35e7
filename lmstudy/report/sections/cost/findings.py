"""Section 8, the study's own cost: where this run's time went, by section, rule and phase.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.study_cost import most_at_once
from lmstudy.report.sections.cost.tables import SHORT, _leased, _shares, _text, by_section


def concurrency_findings(frame: pd.DataFrame) -> list[str]:
    """How many measuring jobs ran at once, on how many GPUs; waits; GPUs shared with others."""
    jobs = _leased(frame)
    if jobs.empty:
        return []
    at_once = most_at_once(jobs)
    gpus = sorted((g for g in set(_text(jobs["gpu_index"])) if g),
                  key=lambda g: (not g.isdigit(), int(g) if g.isdigit() else 0, g))  # 2 before 10
    span = jobs["ended_at"].max() - jobs["started_at"].min()
    busy = (jobs["ended_at"] - jobs["started_at"]).sum()
    where = f"on {len(gpus)} GPU(s) ({', '.join(gpus)})" if gpus else "with no GPU named"
    items = [
        f"Measuring jobs ran at most {at_once} at once, {where}: {busy:.0f} s of measuring jobs "
        f"within {span:.0f} s from the first one's start to the last one's end "
        f"({busy / span if span > 0 else 1:.1f} at a time on average)."
    ]
    column = "waited_s" if "waited_s" in jobs else "wait_s"
    waited = jobs[column].sum()
    if waited > 0:
        items.append(
            f"{(jobs[column] > 0).sum()} job(s) waited {waited:.0f} s in all for a GPU that another job "
            "held (another run on this machine, or more GPU jobs than GPUs)."
        )
    jobs = jobs.assign(gpu_index=_text(jobs["gpu_index"]), foreign_processes=_text(jobs["foreign_processes"]))
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
            + ", ".join(f"{SHORT[c]} {100 * s:.0f}%" for c, s in parts if s >= 0.005)
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
