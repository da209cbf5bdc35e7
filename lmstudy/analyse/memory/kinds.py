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

Under autocast (bf16, fp16), the forward's copies of the weights in the low
precision are their own kind, "autocast cache": autocast casts each matmul
weight once per forward and keeps the copy until the autocast region ends
(or, in a training step, until the backward that saved it is done), so it is
constant in the context length, and read as activations it made bf16's look
86x fp32's. A snapshot does not record dtypes, so they are found by size and
lifetime: an allocation of the forward phase whose requested size is half of
a parameter's (fp32 -> 2-byte copy; each parameter matched at most once) and
that is still live after the forward's last allocation (the cache holds it to
the region's end; forward's own temporaries of that size are freed before).
Checked on the real snapshots (tests/test_memory_analyzer.py): the copies
are exactly 2 bytes per matmul weight, and in a forward they are what
autocast's ``__exit__`` frees. An activation of exactly a weight's size that
is saved for the backward would be taken for a copy (batch x context equal to
a layer's width): rare, and the test would show it.

Bytes by kind count what was requested (a parameter's exact bytes); the
blocks' rounding beyond the request (the caching allocator serves a request
from a cached block up to 1 MiB larger) is a kind of its own, so the kinds
still sum to the peak and optimizer state is exactly AdamW's two moments.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter

from lmstudy.analyse.memory.phases import PHASES
from lmstudy.analyse.memory.snapshot import Allocation, Snapshot

PARAMETERS = "parameters"
GRADIENTS = "gradients"
OPTIMIZER_STATE = "optimizer_state"
AUTOCAST_CACHE = "autocast_cache"  # autocast's low-precision copies of the weights
ACTIVATIONS = "activations"
TEMPORARIES = "temporaries"
OTHER = "other"  # identified as neither of the above, e.g. the input batch
BEFORE_RECORDING = "before_recording"  # unidentified, no tensor addresses known
ROUNDING = "allocator_rounding"  # blocks' bytes beyond what was requested
KINDS = (
    PARAMETERS,
    GRADIENTS,
    OPTIMIZER_STATE,
    AUTOCAST_CACHE,
    ACTIVATIONS,
    TEMPORARIES,
    OTHER,
    BEFORE_RECORDING,
    ROUNDING,
)
# Precisions that run the forward under autocast (weights cast per forward).
AUTOCAST_PRECISIONS = ("bf16", "fp16")


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


def _autocast_copies(snapshot: Snapshot, labels: list[str], parameters: list[Allocation]) -> set[int]:
    """ids of the forward's allocations that are autocast's copies of `parameters` (module docstring)."""
    halves = Counter(a.requested // 2 for a in parameters)
    forward_allocs = [
        i for i, e in enumerate(snapshot.trace) if e["action"] == "alloc" and labels[i] == "forward"
    ]
    if not forward_allocs:
        return set()
    last = forward_allocs[-1]
    candidates = sorted(
        (
            a
            for a in snapshot.allocations
            if not a.before_recording
            and labels[a.alloc_index] == "forward"
            and (a.free_index is None or a.free_index > last)
        ),
        key=lambda a: a.alloc_index,
    )
    found = set()
    for a in candidates:
        if halves[a.requested] > 0:
            halves[a.requested] -= 1
            found.add(id(a))
    return found


def classify(
    snapshot: Snapshot, labels: list[str], tensors: dict | None = None, precision: str = ""
) -> dict[int, str]:
    """id(allocation) -> kind, for every allocation of the snapshot.

    `precision` is the step's ("bf16": autocast's weight copies are looked
    for; they need the parameters' addresses, in `tensors`).
    """
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
    if precision in AUTOCAST_PRECISIONS:
        parameters = [a for a in before if known.get(id(a)) == PARAMETERS]
        for ident in _autocast_copies(snapshot, labels, parameters):
            known.setdefault(ident, AUTOCAST_CACHE)
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
    """Requested bytes by kind, and the blocks' rounding beyond them as ROUNDING: they sum to the blocks'."""
    totals = dict.fromkeys(KINDS, 0)
    for a in allocations:
        totals[kinds[id(a)]] += a.requested
        totals[ROUNDING] += a.size - a.requested
    return totals


__all__ = ["KINDS", "PHASES", "bytes_by_kind", "classify"]
