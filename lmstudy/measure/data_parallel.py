"""Data-parallel training by hand, in the four ways the course asks for, beside PyTorch's own, and
an optimizer that shards its state across the ranks (ZeRO stage 1).

Every version averages the gradients over the ranks (a sum by all-reduce, divided by the world
size), so that after each step every rank holds the parameters single-process training on the
ranks' batches put together would (tests/test_data_parallel.py checks it):

- naive: one all-reduce per parameter, after the backward;
- flat: one all-reduce of every gradient flattened into one buffer, after the backward;
- overlapped: each parameter's all-reduce started (async) from its gradient hook while the
  backward runs, waited for before the optimizer step;
- bucketed: parameters grouped, in the backward's order, into buckets of at most `bucket_mb`
  MB; a bucket's flattened all-reduce starts as its last gradient arrives;
- ddp: torch.nn.parallel.DistributedDataParallel (its own buckets, 25 MB by default);
- none: no communication (each rank trains alone): the step the others are compared to.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

VERSIONS = ("none", "naive", "flat", "overlapped", "bucketed", "ddp")
MB = 1_000_000


class GradientSync:
    """How one version averages gradients: `finish` after the backward. Where `ranges` is set
    (lmstudy.measure.comm_ranges.CommRanges), each all-reduce's range is recorded: issued, completed."""

    def __init__(self, model: nn.Module, world_size: int) -> None:
        self.model, self.world_size = model, world_size
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.ranges = None

    def _all_reduce(self, tensor: torch.Tensor, async_op: bool = False):
        """dist.all_reduce, its range recorded where `ranges` is set (a callback on the work's future
        closes an async one)."""
        if self.ranges is None:
            return dist.all_reduce(tensor, async_op=async_op)
        ranges, index = self.ranges, self.ranges.issued()
        if not async_op:
            dist.all_reduce(tensor)
            ranges.done(index)
            return None
        work = dist.all_reduce(tensor, async_op=True)
        work.get_future().then(lambda _: ranges.done(index))
        return work

    def finish(self) -> None:
        """Every gradient averaged over the ranks once this returns (the work queued on the device)."""


class NoSync(GradientSync):
    pass


class Naive(GradientSync):
    def finish(self) -> None:
        for p in self.params:
            self._all_reduce(p.grad)
            p.grad.div_(self.world_size)


class Flat(GradientSync):
    def finish(self) -> None:
        grads = [p.grad for p in self.params]
        flat = _flatten_dense_tensors(grads)
        self._all_reduce(flat)
        flat.div_(self.world_size)
        for grad, reduced in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
            grad.copy_(reduced)


class Overlapped(GradientSync):
    def __init__(self, model: nn.Module, world_size: int) -> None:
        super().__init__(model, world_size)
        self.pending: list = []
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._start)

    def _start(self, p: torch.Tensor) -> None:
        self.pending.append((self._all_reduce(p.grad, async_op=True), p))

    def finish(self) -> None:
        for handle, p in self.pending:
            handle.wait()
            p.grad.div_(self.world_size)
        self.pending = []


def buckets_of(params: list, bucket_bytes: int) -> list[list]:
    """`params` in the backward's order (the reverse of the model's), in buckets of at most
    `bucket_bytes` (a parameter larger than that has a bucket of its own)."""
    buckets: list[list] = [[]]
    filled = 0
    for p in reversed(params):
        size = p.numel() * p.element_size()
        if buckets[-1] and filled + size > bucket_bytes:
            buckets.append([])
            filled = 0
        buckets[-1].append(p)
        filled += size
    return buckets


class Bucketed(GradientSync):
    def __init__(self, model: nn.Module, world_size: int, bucket_mb: float) -> None:
        super().__init__(model, world_size)
        self.buckets = buckets_of(self.params, int(bucket_mb * MB))
        self.bucket_of = {id(p): i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.waiting = [len(bucket) for bucket in self.buckets]
        self.started: dict[int, tuple] = {}
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._arrived)

    def _arrived(self, p: torch.Tensor) -> None:
        index = self.bucket_of[id(p)]
        self.waiting[index] -= 1
        if self.waiting[index] == 0:
            self._start(index)

    def _start(self, index: int) -> None:
        flat = _flatten_dense_tensors([p.grad for p in self.buckets[index]])
        self.started[index] = (self._all_reduce(flat, async_op=True), flat)

    def finish(self) -> None:
        for index in range(len(self.buckets)):
            if index not in self.started:  # a bucket with a parameter the backward left without a gradient
                for p in self.buckets[index]:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                self._start(index)
        for index, (handle, flat) in sorted(self.started.items()):
            handle.wait()
            flat.div_(self.world_size)
            grads = [p.grad for p in self.buckets[index]]
            for grad, reduced in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
                grad.copy_(reduced)
        self.started = {}
        self.waiting = [len(bucket) for bucket in self.buckets]


def _timed_allreduce_hook(ranges, bucket):
    """DDP's own all-reduce of a bucket (torch's allreduce_hook), its range recorded in `ranges`."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    index = ranges.issued()

    def completed(future):
        ranges.done(index)
        return future.value()

    return default_hooks.allreduce_hook(None, bucket).then(completed)


def wrap(
    version: str, model: nn.Module, world_size: int, device: torch.device, bucket_mb: float = 25.0,
    ranges=None,
):
    """(the module to call, its GradientSync) for `version`; `ranges` (a CommRanges, or None) records
    each all-reduce's range."""
    if version == "ddp":
        ddp = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=bucket_mb
        )
        if ranges is not None:
            ddp.register_comm_hook(ranges, _timed_allreduce_hook)
        sync = GradientSync(model, world_size)
        sync.ranges = ranges
        return ddp, sync
    sync = {"none": NoSync, "naive": Naive, "flat": Flat, "overlapped": Overlapped}.get(version)
    if version == "bucketed":
        sync = Bucketed(model, world_size, bucket_mb)
    elif sync is None:
        raise ValueError(f"unknown data-parallel version {version!r}: one of {', '.join(VERSIONS)}")
    else:
        sync = sync(model, world_size)
    sync.ranges = ranges
    return model, sync


def shard_owners(params: list, world_size: int) -> list[int]:
    """Which rank owns each parameter's optimizer state: largest first, to the least-loaded rank."""
    load = [0] * world_size
    owners = [0] * len(params)
    for index in sorted(range(len(params)), key=lambda i: -params[i].numel()):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        owners[index] = rank
        load[rank] += params[index].numel()
    return owners


class ShardedOptimizer(torch.optim.Optimizer):
    """An optimizer whose state is split across the ranks (ZeRO stage 1).

    Each rank keeps `optimizer_class`'s state only for the parameters it owns
    (`shard_owners`), steps only those, and then sends them to the other ranks
    (one broadcast of each rank's flattened parameters). The gradients must be
    averaged over the ranks before `step` (any GradientSync).
    """

    def __init__(self, params, optimizer_class=torch.optim.AdamW, **defaults) -> None:
        self.all_params = [p for p in params if p.requires_grad]
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.owners = shard_owners(self.all_params, self.world_size)
        self.by_rank = [
            [p for p, o in zip(self.all_params, self.owners, strict=True) if o == r]
            for r in range(self.world_size)
        ]
        owned = self.by_rank[self.rank]
        self.local = optimizer_class(owned, **defaults) if owned else None
        super().__init__(self.all_params, defaults)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.all_params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self, closure=None):
        if self.local is not None:
            self.local.step()
        for rank, params in enumerate(self.by_rank):
            if not params:
                continue
            flat = _flatten_dense_tensors([p.data for p in params])
            dist.broadcast(flat, src=rank)
            if rank != self.rank:
                for p, value in zip(params, _unflatten_dense_tensors(flat, params), strict=True):
                    p.data.copy_(value)
        return None

    def state_bytes(self) -> int:
        """The bytes of this rank's optimizer state (its tensors)."""
        if self.local is None:
            return 0
        return sum(
            t.numel() * t.element_size()
            for s in self.local.state.values()
            for t in s.values()
            if torch.is_tensor(t)
        )
