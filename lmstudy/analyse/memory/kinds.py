"""What each allocation is: parameters, gradients, optimizer state, ...

Two sources, the first that knows wins:

1. The tensors' addresses, when the snapshot job recorded them beside the
   snapshot (``meta["tensors"]``): parameters and optimizer state (live
   before recording began), the gradients before the step (the warm-up's,
   freed by ``zero_grad``) and after it, the input batch.
2. Otherwise the allocation's lifetime and phase, from the snapshot alone:
   - allocated in the backward phase and still live at the end of the step:
     gradients (every other backward temporary is freed by then);
   - allocated in the optimizer phase and still live at the end: optimizer
     state (its lazy creation in a first step);
   - allocated before recording and freed by ``zero_grad``: gradients;
   - allocated in the forward phase: activations (what forward keeps for
     backward, and forward's temporaries);
   - allocated elsewhere during the step: temporaries;
   - allocated before recording and not identified: parameters, optimizer
     state and inputs together ("before recording").
"""

from __future__ import annotations

from bisect import bisect_right

from lmstudy.analyse.memory.phases import PHASES
from lmstudy.analyse.memory.snapshot import Allocation, Snapshot

PARAMETERS = "parameters"
GRADIENTS = "gradients"
OPTIMIZER_STATE = "optimizer_state"
ACTIVATIONS = "activations"
TEMPORARIES = "temporaries"
OTHER = "other"  # identified as neither of the above, e.g. the input batch
BEFORE_RECORDING = "before_recording"  # unidentified, no tensor addresses known
KINDS = (PARAMETERS, GRADIENTS, OPTIMIZER_STATE, ACTIVATIONS, TEMPORARIES, OTHER, BEFORE_RECORDING)


def _containing(allocations: list[Allocation], pointers: list[int]) -> set[int]:
    """ids of the allocations whose bytes hold one of `pointers`."""
    ordered = sorted(allocations, key=lambda a: a.addr)
    starts = [a.addr for a in ordered]
    hit = set()
    for ptr in pointers:
        i = bisect_right(starts, ptr) - 1
        if i >= 0 and ptr < ordered[i].addr + max(ordered[i].size, 1):
            hit.add(id(ordered[i]))
    return hit


def _freed_by_zero_grad(a: Allocation) -> bool:
    return any(f.get("name") == "zero_grad" for f in a.free_frames)


def classify(snapshot: Snapshot, labels: list[str], tensors: dict | None = None) -> dict[int, str]:
    """id(allocation) -> kind, for every allocation of the snapshot."""
    tensors = tensors or {}
    before = [a for a in snapshot.allocations if a.before_recording]
    at_end = [a for a in snapshot.allocations if a.live_at_end]
    known: dict[int, str] = {}
    for kind, pool, key in (
        (PARAMETERS, before, "parameters"),
        (OPTIMIZER_STATE, before, "optimizer_state"),
        (GRADIENTS, before, "gradients_before"),
        (OTHER, before, "inputs"),
        (GRADIENTS, at_end, "gradients_after"),
        (OPTIMIZER_STATE, at_end, "optimizer_state_after"),
    ):
        for ident in _containing(pool, tensors.get(key, [])):
            known.setdefault(ident, kind)
    has_addresses = bool(tensors)
    kinds = {}
    for a in snapshot.allocations:
        kind = known.get(id(a))
        if kind is None:
            kind = _by_lifetime(a, labels, has_addresses)
        kinds[id(a)] = kind
    return kinds


def _by_lifetime(a: Allocation, labels: list[str], has_addresses: bool) -> str:
    if a.before_recording:
        if _freed_by_zero_grad(a):
            return GRADIENTS
        return OTHER if has_addresses else BEFORE_RECORDING
    phase = labels[a.alloc_index]
    if phase == "backward" and a.live_at_end:
        return GRADIENTS
    if phase == "optimizer" and a.live_at_end:
        return OPTIMIZER_STATE
    if phase == "forward":
        return ACTIVATIONS
    return TEMPORARIES


def bytes_by_kind(allocations: list[Allocation], kinds: dict[int, str]) -> dict[str, int]:
    totals = dict.fromkeys(KINDS, 0)
    for a in allocations:
        totals[kinds[id(a)]] += a.size
    return totals


__all__ = ["KINDS", "PHASES", "bytes_by_kind", "classify"]
