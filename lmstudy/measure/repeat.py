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
import statistics
from collections.abc import Callable, Hashable, Sequence


@dataclasses.dataclass(frozen=True)
class NoisePolicy:
    min_processes: int = 2
    max_processes: int = 4
    max_spread: float = 0.05

    def __post_init__(self):
        if not 1 <= self.min_processes <= self.max_processes:
            raise ValueError("need 1 <= min_processes <= max_processes")

    @classmethod
    def from_config(cls, noise: dict) -> NoisePolicy:
        return cls(noise["min_processes"], noise["max_processes"], noise["max_spread"])

    def wants_more(self, processes: Sequence[Sequence[float] | None]) -> bool:
        """Whether a key needs another process; `processes`: each one's steady samples (None: ended early)."""
        if not processes or any(not p for p in processes):
            return not processes
        if len(processes) < self.min_processes:
            return True
        if len(processes) >= self.max_processes:
            return False
        return spread([statistics.median(p) for p in processes]) > self.max_spread


def spread(medians: Sequence[float]) -> float:
    """max/min - 1 of the processes' medians (0 for one process)."""
    return max(medians) / min(medians) - 1 if min(medians) > 0 else float("inf")


def measure_until_stable(
    measure: Callable[[list[Hashable], int], dict[Hashable, dict]],
    keys: Sequence[Hashable],
    samples_of: Callable[[dict], Sequence[float] | None],
    policy: NoisePolicy,
    progress: Callable[[str], None] = print,
) -> dict[Hashable, list[dict]]:
    """Every key's results, one per process, measured in rounds until `policy` is content.

    `measure(keys, round)` measures the given keys in fresh processes (one
    per key, or one for all: the caller decides) and returns each key's
    result; `samples_of(result)` is the steady-state samples the policy
    judges (None or empty: the process ended early).
    """
    results: dict[Hashable, list[dict]] = {key: [] for key in keys}
    pending = list(keys)
    round_index = 0
    while pending:
        for key, result in measure(pending, round_index).items():
            results[key].append(result)
        round_index += 1
        pending = [k for k in keys if policy.wants_more([samples_of(r) for r in results[k]])]
        if pending and round_index >= policy.min_processes:
            progress(f"round {round_index + 1}: {len(pending)} of {len(keys)} still spread by more than "
                     f"{policy.max_spread:.0%} between processes: "
                     + ", ".join(str(k) for k in pending))
    return results
