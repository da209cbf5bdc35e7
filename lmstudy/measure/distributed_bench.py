"""What each rank of the distributed sections runs (lmstudy.measure.distributed.run_group's targets).

Every timed region starts on all ranks at once (a barrier with the device
drained before and after it: lmstudy.measure.distributed.timed_barrier) and
ends when the rank's device has finished (synchronize); each rank reports its
own time, so the report shows the spread between ranks beside that between
repetitions. Warm-up steps and collectives are run and not recorded.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from lmstudy.errors import UserError
from lmstudy.measure import data_parallel
from lmstudy.measure.comm_ranges import CommRanges
from lmstudy.measure.distributed import synchronize, timed_barrier
from lmstudy.measure.factory import build_model, check_not_meta, forward_logits
from lmstudy.measure.model import cross_entropy
from lmstudy.model_choice import ModelChoice

MB = data_parallel.MB
DIMS = ("vocab_size", "d_model", "d_ff", "num_layers", "num_heads")


def allreduce_rank(rank: int, world_size: int, device: torch.device, spec: dict) -> dict:
    """All-reduce float32 tensors of each size: one row per repetition (this rank's time)."""
    rows = []
    for size_mb in spec["sizes_mb"]:
        numel = int(size_mb * MB) // 4
        x = torch.full((numel,), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(x)  # also the check that the group sums: 1 + 2 + ... + world_size
        expected = world_size * (world_size + 1) / 2
        if float(x[0]) != expected or float(x[-1]) != expected:
            raise RuntimeError(f"all-reduce summed to {float(x[0])}, not {expected}")
        for _ in range(spec["warmup"]):
            dist.all_reduce(x)
        for repeat in range(spec["repeats"]):
            timed_barrier(device)
            start = time.perf_counter()
            dist.all_reduce(x)
            synchronize(device)
            rows.append(
                {
                    "size_mb": size_mb,
                    "bytes": numel * 4,
                    "repeat": repeat,
                    "rank": rank,
                    "seconds": time.perf_counter() - start,
                }
            )
        del x
    return {"rows": rows}


def _choice(spec: dict) -> ModelChoice:
    """The model the spec names (config model:): the built-in one where it names none."""
    return ModelChoice.coerce(spec["model"]) if "model" in spec else ModelChoice()


def _model(spec: dict, device: torch.device, seed: int = 0) -> torch.nn.Module:
    """The spec's model, built by its factory (lmstudy.measure.factory: here, in the spawned rank, the
    only process that runs the user's code) on the host from one seed, so every rank starts from the
    same weights (the hand-written versions do not broadcast them, as DDP does), then moved."""
    choice = _choice(spec)
    torch.manual_seed(seed)
    with torch.device("cpu"):
        model = build_model(choice, {key: spec[key] for key in DIMS}, spec["context_length"])
    check_not_meta(model, choice.factory)
    if not any(p.requires_grad for p in model.parameters()):
        raise UserError(
            f"the model of factory {choice.factory!r} has no parameter that requires grad, so there is "
            "nothing to train data-parallel or to shard: switch the ddp and sharding sections off for it."
        )
    return model.to(device)


def _loss(spec: dict, module, tokens, targets):
    """The training loss of the (wrapped) model: its logits checked as every section checks them (a
    tensor, a tuple's first item or .logits, of the batch's shape; lmstudy.measure.factory.logits_of)."""
    factory = _choice(spec).factory
    return cross_entropy(forward_logits(module, tokens, spec["vocab_size"], factory), targets)


def _batch(spec: dict, rank: int, step: int, device: torch.device):
    """This rank's batch of step `step`: tokens and targets, the same on every run."""
    generator = torch.Generator().manual_seed(1000 * step + rank)
    tokens = torch.randint(
        0, spec["vocab_size"], (spec["batch_size"], spec["context_length"] + 1), generator=generator
    )
    tokens = tokens.to(device)
    return tokens[:, :-1], tokens[:, 1:]


def _optimizer(model, sharded: bool):
    kwargs = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    if sharded:
        return data_parallel.ShardedOptimizer(model.parameters(), torch.optim.AdamW, **kwargs)
    return torch.optim.AdamW(model.parameters(), **kwargs)


def _versions(spec: dict) -> list[tuple[str, float]]:
    """(version, bucket MB) for each version the spec asks for: one per bucket size for bucketed."""
    out = []
    for version in spec["versions"]:
        if version == "bucketed":
            out.extend(("bucketed", float(mb)) for mb in spec["bucket_mb"])
        else:
            out.append((version, 25.0 if version == "ddp" else 0.0))
    return out


def ddp_rank(rank: int, world_size: int, device: torch.device, spec: dict) -> dict:
    """Each data-parallel version's training steps: a row per timed step (step and communication time)."""
    rows, gradient_bytes = [], 0
    for version, bucket_mb in _versions(spec):
        model = _model(spec, device)
        gradient_bytes = sum(p.numel() * 4 for p in model.parameters() if p.requires_grad)
        # The communication's ranges on a CPU only: on a GPU the host's clock cannot see them
        # (lmstudy.measure.comm_ranges).
        ranges = CommRanges() if device.type == "cpu" else None
        module, sync = data_parallel.wrap(version, model, world_size, device, bucket_mb or 25.0, ranges)
        # The backward's computing ends when its last gradient lands: DDP's backward() also waits for
        # its all-reduces, which are not the backward's own time.
        if ranges is not None:
            for p in model.parameters():
                p.register_post_accumulate_grad_hook(ranges.gradient_landed)
        optimizer = _optimizer(model, sharded=False)
        for step in range(spec["warmup_steps"] + spec["timed_steps"]):
            tokens, targets = _batch(spec, rank, step, device)
            if ranges is not None:
                ranges.reset()
            timed_barrier(device)
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            loss = _loss(spec, module, tokens, targets)
            backward_start = time.perf_counter()
            loss.backward()
            backward = (backward_start, ranges.last_gradient if ranges is not None else float("nan"))
            comm_s = float("nan")
            if version in ("naive", "flat"):  # all of it after the backward: timed on its own
                synchronize(device)
                backward_done = time.perf_counter()
                sync.finish()
                synchronize(device)
                comm_s = time.perf_counter() - backward_done
            else:
                sync.finish()
            optimizer.step()
            synchronize(device)
            if step >= spec["warmup_steps"]:
                rows.append(
                    {
                        "version": version,
                        "bucket_mb": bucket_mb,
                        "step": step - spec["warmup_steps"],
                        "rank": rank,
                        "step_s": time.perf_counter() - start,
                        "comm_s": comm_s,
                        **(ranges.summary(backward) if ranges is not None else {}),
                    }
                )
        del module, sync, optimizer, model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {"rows": rows, "gradient_bytes": gradient_bytes}


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _memory(device: torch.device) -> tuple[float, float]:
    """(allocated, peak since the last reset) on a GPU, in bytes; NaN on a CPU (no allocator statistics)."""
    if device.type != "cuda":
        return float("nan"), float("nan")
    synchronize(device)
    return float(torch.cuda.memory_allocated(device)), float(torch.cuda.max_memory_allocated(device))


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def sharding_rank(rank: int, world_size: int, device: torch.device, spec: dict) -> dict:
    """Memory and step time of flat data-parallel AdamW training, its state whole or sharded."""
    rows = []
    for sharded in (False, True):
        _reset_peak(device)
        model = _model(spec, device)
        sync = data_parallel.Flat(model, world_size)
        optimizer = _optimizer(model, sharded)
        params = list(model.parameters())
        allocated, peak = _memory(device)
        base = {"sharded": sharded, "rank": rank, "params_bytes": _bytes(params)}
        rows.append(
            {
                **base,
                "phase": "after_init",
                "step": -1,
                "allocated_bytes": allocated,
                "peak_bytes": peak,
                "state_bytes": 0,
                "step_s": float("nan"),
            }
        )
        for step in range(spec["warmup_steps"] + spec["timed_steps"]):
            tokens, targets = _batch(spec, rank, step, device)
            timed_barrier(device)
            _reset_peak(device)
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            _loss(spec, model, tokens, targets).backward()
            sync.finish()
            before = _memory(device)
            _reset_peak(device)
            optimizer.step()
            synchronize(device)
            step_s = time.perf_counter() - start
            after = _memory(device)
            state = (
                optimizer.state_bytes()
                if sharded
                else _bytes(t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t))
            )
            if step >= spec["warmup_steps"]:
                for phase, (allocated, peak) in (("before_step", before), ("after_step", after)):
                    rows.append(
                        {
                            **base,
                            "phase": phase,
                            "step": step - spec["warmup_steps"],
                            "allocated_bytes": allocated,
                            "peak_bytes": peak,
                            "state_bytes": state,
                            "step_s": step_s,
                        }
                    )
        del model, sync, optimizer, params
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {"rows": rows}


def equality_rank(rank: int, world_size: int, device: torch.device, spec: dict) -> dict:
    """Each version's parameters (and sharded AdamW's) after `steps` steps, for the tests to compare
    with single-process training (`single_process`)."""
    out = {}
    for version, bucket_mb in [*_versions(spec), ("sharded", 0.0)]:
        model = _model(spec, device)
        dp = "flat" if version == "sharded" else version
        module, sync = data_parallel.wrap(dp, model, world_size, device, bucket_mb or 25.0)
        optimizer = _optimizer(model, sharded=version == "sharded")
        for step in range(spec["timed_steps"]):
            tokens, targets = _batch(spec, rank, step, device)
            optimizer.zero_grad(set_to_none=True)
            _loss(spec, module, tokens, targets).backward()
            sync.finish()
            optimizer.step()
        key = f"{version}-{bucket_mb:g}" if version == "bucketed" else version
        out[key] = torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
    return out


def single_process(spec: dict, world_size: int) -> list[float]:
    """The parameters after `steps` steps of one process training on all ranks' batches together."""
    device = torch.device("cpu")
    model = _model(spec, device)
    optimizer = _optimizer(model, sharded=False)
    for step in range(spec["timed_steps"]):
        batches = [_batch(spec, rank, step, device) for rank in range(world_size)]
        tokens = torch.cat([b[0] for b in batches])
        targets = torch.cat([b[1] for b in batches])
        optimizer.zero_grad(set_to_none=True)
        _loss(spec, model, tokens, targets).backward()
        optimizer.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()
