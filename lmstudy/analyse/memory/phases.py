"""Which part of the step each trace event belongs to.

The step functions (lmstudy.measure.steps) mark ``step``, ``forward``, ``backward``
and ``optimizer`` with ``lmstudy.measure.markers.annotate``, whose
``torch.profiler.record_function`` the CUDA allocator records into the
snapshot while history is on (``external_annotations``: START/END with a
``time_us`` on the same clock as the trace). An event belongs to the
innermost marked phase whose range holds its time; events inside ``step``
but outside the three phases (``zero_grad`` at the start of a training step)
are ``step``, and events outside any step are ``outside``.

The markers are part of the code being measured, so any snapshot of these
step functions carries them; nothing extra has to be recorded.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right

from lmstudy.ranges import PHASES, STEP

OUTSIDE = "outside"


@dataclasses.dataclass(frozen=True)
class Range:
    name: str
    start_us: int
    end_us: int  # the END mark, or the last event's time when none was recorded


def ranges(annotations: list[dict], names=(STEP, *PHASES), last_us: int | None = None) -> list[Range]:
    """The START/END pairs of `names`, in order of their start."""
    opened: dict[str, list[int]] = {}
    found = []
    for mark in sorted(annotations, key=lambda a: a["time_us"]):
        name = mark["name"]
        if name not in names:
            continue
        if mark["stage"] == "START":
            opened.setdefault(name, []).append(mark["time_us"])
        elif opened.get(name):
            found.append(Range(name, opened[name].pop(), mark["time_us"]))
    for name, starts in opened.items():
        if last_us is not None:
            found += [Range(name, start, last_us) for start in starts]
    return sorted(found, key=lambda r: r.start_us)


def label_events(trace: list[dict], annotations: list[dict]) -> list[str]:
    """The phase of every trace event."""
    last_us = trace[-1]["time_us"] if trace else None
    marked = ranges(annotations, last_us=last_us)
    steps = [r for r in marked if r.name == STEP]
    phases = [r for r in marked if r.name in PHASES]
    starts = [r.start_us for r in phases]
    labels = []
    for event in trace:
        t = event["time_us"]
        label = OUTSIDE
        if any(r.start_us <= t <= r.end_us for r in steps):
            label = STEP
        i = bisect_right(starts, t) - 1
        # Phases do not nest among themselves, so the last one started is the candidate.
        if i >= 0 and phases[i].start_us <= t <= phases[i].end_us:
            label = phases[i].name
        labels.append(label)
    return labels


def spans(labels: list[str]) -> list[dict]:
    """Consecutive runs of one phase label: {phase, start_index, end_index}."""
    runs: list[dict] = []
    for index, label in enumerate(labels):
        if runs and runs[-1]["phase"] == label:
            runs[-1]["end_index"] = index
        else:
            runs.append({"phase": label, "start_index": index, "end_index": index})
    return runs
