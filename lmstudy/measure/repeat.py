"""Measure in fresh processes until they agree: the noise criterion of every section that times steps.

As pyperf's worker processes and nvbench's noise criterion: each key (a
pass, a rung, a sequence length...) is measured in at least
`min_processes` fresh processes, and in more, up to `max_processes`, while
the medians of its processes spread by more than `max_spread` (max/min - 1).
Rounds interleave the keys (pass 1, pass 2, pass 3, pass 1, ...), so a slow
drift of the machine spreads over all of them instead of biasing one.

A key whose process ended without samples (out of memory, unsupported) is
not measured again: that outcome does not change from one process to the
next. Torch-free.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Hashable, Sequence

from lmstudy import environment
from lmstudy.measure.fresh_process import mark_forking_parent, run_forked
from lmstudy.phases import PhaseClock


@dataclasses.dataclass(frozen=True)
class NoisePolicy:
    """config.yaml's noise: (no defaults here), through the job's spec (lmstudy.job_spec)."""

    min_processes: int
    max_processes: int
    max_spread: float
    # A host-bound key (the GPU busy for less than this share of its step) whose processes' GPU times
    # agree stops at min_processes: more processes would narrow the host's noise, not decide the GPU's.
    # None: GPU time never stops repetition early.
    min_gpu_busy: float | None

    def __post_init__(self):
        if not 1 <= self.min_processes <= self.max_processes:
            raise ValueError("need 1 <= min_processes <= max_processes")

    @classmethod
    def from_config(cls, noise: dict) -> NoisePolicy:
        return cls(noise["min_processes"], noise["max_processes"], noise["max_spread"],
                   noise["min_gpu_busy"])

    def wants_more(self, processes: Sequence[Sequence[float] | None],
                   gpu_busy_ms: Sequence[float | None] = ()) -> bool:
        """Whether a key needs another process; `processes`: each one's steady samples (None: ended
        early); `gpu_busy_ms`: each one's GPU busy time per step, where it was recorded."""
        if not processes or any(not p for p in processes):
            return not processes
        if len(processes) < self.min_processes:
            return True
        if len(processes) >= self.max_processes:
            return False
        medians = [statistics.median(p) for p in processes]
        if self.gpu_decides(medians, gpu_busy_ms):
            return False
        return spread(medians) > self.max_spread

    def gpu_decides(self, wall_medians: Sequence[float], gpu_busy_ms: Sequence[float | None]) -> bool:
        """Whether the key is host-bound in every process and its GPU times agree within max_spread:
        then its GPU time already answers, and its wall time is the host's noise."""
        if self.min_gpu_busy is None or len(gpu_busy_ms) != len(wall_medians) or None in gpu_busy_ms:
            return False
        pairs = zip(gpu_busy_ms, wall_medians, strict=True)
        host_bound = all(busy < self.min_gpu_busy * wall for busy, wall in pairs)
        return host_bound and spread(list(gpu_busy_ms)) <= self.max_spread


def spread(medians: Sequence[float]) -> float:
    """max/min - 1 of the processes' medians (0 for one process)."""
    return max(medians) / min(medians) - 1 if min(medians) > 0 else float("inf")


def measure_until_stable(
    measure: Callable[[list[Hashable], int], dict[Hashable, dict]],
    keys: Sequence[Hashable],
    samples_of: Callable[[dict], Sequence[float] | None],
    policy: NoisePolicy,
    progress: Callable[[str], None] = print,
    clock: PhaseClock | None = None,
    gpu_busy_of: Callable[[dict], float | None] = lambda result: result.get("gpu_busy_ms"),
) -> dict[Hashable, list[dict]]:
    """Every key's results, one per process, measured in rounds until `policy` is content.

    `measure(keys, round)` measures the given keys in fresh processes (one
    per key, or one for all: the caller decides) and returns each key's
    result; `samples_of(result)` is the steady-state samples the policy
    judges (None or empty: the process ended early), `gpu_busy_of(result)`
    its GPU busy time per step (None where not recorded): a host-bound key
    whose GPU times agree stops at the policy's minimum. `clock` gets each
    round's wall time (PhaseClock.rounds): what the repetition cost.
    """
    mark_forking_parent()  # torch is imported by now: a refused fork can name what started CUDA
    environment.host_facts()  # nvidia-smi and git once here: every process forked below inherits them
    results: dict[Hashable, list[dict]] = {key: [] for key in keys}
    pending = list(keys)
    round_index = 0
    while pending:
        started = time.perf_counter()
        for key, result in measure(pending, round_index).items():
            results[key].append(result)
        if clock is not None:
            clock.add_round(time.perf_counter() - started, policy.min_processes)
        round_index += 1
        pending = [k for k in keys if policy.wants_more([samples_of(r) for r in results[k]],
                                                        [gpu_busy_of(r) for r in results[k]])]
        if pending and round_index >= policy.min_processes:
            progress(f"round {round_index + 1}: {len(pending)} of {len(keys)} still spread by more than "
                     f"{policy.max_spread:.0%} between processes: "
                     + ", ".join(str(k) for k in pending))
    return results


def combine_processes(rows: Sequence[dict], parts: Sequence[str] = ("",)) -> dict:
    """One configuration's row from its rows of several processes (the first process's, updated).

    For each part (a column prefix: "" for step_times_ms, "forward_" for
    forward_times_ms...), the median over the processes that measured it ok
    with its interval (lmstudy.analyse.stats.process_summary), the spread
    between processes, summary statistics over every step, and every
    process's steps as a list per process.
    The GPU's busy time and kernels per step, where the processes recorded
    them, are their median with each process's value (gpu_columns).
    """
    from lmstudy.analyse.stats import process_summary, summarize_ms

    row = dict(rows[0])
    ok = [r for r in rows if r.get("status") == "ok"]
    if row.get("status") != "ok" or not ok:
        return row
    row["processes"] = len(ok)
    for part in parts:
        row.update(gpu_columns(ok, part))
    for part in parts:
        column = f"{part}times_ms" if part else "step_times_ms"
        processes = [json.loads(r[column]) for r in ok if r.get(column)]
        if not processes:
            continue
        summary = process_summary(processes)
        every_step = [t / 1e3 for p in processes for t in p]
        row.update({f"{part}{k}": v for k, v in summarize_ms(every_step).items()})
        row.update({f"{part}median_ms": summary["median"], f"{part}ci_low_ms": summary["ci_low"],
                    f"{part}ci_high_ms": summary["ci_high"], f"{part}process_spread": summary["spread"],
                    column: json.dumps(processes)})
    return row


def gpu_columns(results: Sequence[dict], part: str = "") -> dict:
    """The GPU's busy time and kernels per step over a configuration's processes: the median, and each
    process's value (JSON) for the comparison of two runs. None where no process profiled (a CPU)."""
    columns = {}
    on_gpu = any(r.get(f"{part}kernels_per_step") is not None for r in results)
    for measure in (f"{part}gpu_busy_ms", f"{part}kernels_per_step"):
        values = [r[measure] for r in results if r.get(measure) is not None]
        columns[measure] = statistics.median(values) if values else None
        # Each process's value for the comparison of two runs: GPU time only (on a CPU, a first
        # process's profile holds operator time, which the comparison must not read as the GPU's).
        columns[f"{measure}_processes"] = (json.dumps([round(v, 6) for v in values]) if values and on_gpu
                                           else None)
    return columns


class ChildPhases:
    """A PhaseClock's add/timing in a forked process: its seconds go back to the job's clock."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + max(0.0, seconds)

    # The clock's own context manager: it only calls add().
    timing = PhaseClock.timing


def _with_phases(function, *args) -> dict:
    phases = ChildPhases()
    return {"value": function(*args, phases), "phases": phases.seconds}


def forked_with_phases(function, *args, clock, what: str):
    """`function(*args, phases)` in a fresh process forked from this one; its phases added to `clock`."""
    result = run_forked(_with_phases, function, *args, what=what)
    for phase, seconds in result["phases"].items():
        clock.add(phase, seconds)
    clock.add("start", result.get("fork_s", 0.0))
    return result["value"]
