"""Run a function in N fresh processes of one process group (torch.distributed), gathering their results.

The distributed sections (comm, ddp, sharding) measure several processes
that talk: each is a fresh interpreter started by torch.multiprocessing's
spawn (never a fork: NCCL and CUDA want a process of their own), joined into
one group through a rendezvous file in a private temporary folder (no port to
collide with another job's). Rank r measures on GPU r of the job's leased GPUs
(CUDA_VISIBLE_DEVICES, lmstudy.launch.gpu_lease) with NCCL, or on the CPU with
Gloo.

The job's process stays the forking parent it is (lmstudy.measure.fresh_process):
it never starts CUDA, and `run_group` refuses, in one sentence, where something
did. Each rank's result comes back as JSON in a file of the folder, no pickles;
a UserError in a rank is raised again here as the same sentence.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path

from lmstudy.errors import UserError
from lmstudy.measure.fresh_process import ChildFailed, check_cuda_untouched

BACKENDS = {"cuda": "nccl", "cpu": "gloo"}


def backend_of(device_type: str) -> str:
    """The collective backend of a device type: NCCL on GPUs, Gloo on CPUs."""
    return BACKENDS[device_type]


def visible_gpus(environ=os.environ) -> int | None:
    """How many GPUs the job was given (CUDA_VISIBLE_DEVICES), without starting CUDA; None where unset."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    return len([d for d in visible.split(",") if d.strip()])


def check_enough_gpus(world_size: int, what: str, environ=os.environ) -> None:
    """Refuse, in one sentence, a GPU group larger than the GPUs this job was given."""
    have = visible_gpus(environ)
    if have is not None and have < world_size:
        raise UserError(
            f"{what} needs {world_size} GPUs and this job was given {have} (CUDA_VISIBLE_DEVICES="
            f"{environ.get('CUDA_VISIBLE_DEVICES', '')}): run it on a node with {world_size} GPUs "
            f"(--resources gpu={world_size}), or lower the section's world sizes in the config."
        )


def run_group(target: Callable, world_size: int, device_type: str, payload: dict, what: str) -> list[dict]:
    """`target(rank, world_size, device, payload)` in `world_size` spawned processes of one group.

    `target` is a module-level function (the children import its module by name); its dict results
    come back in rank order.
    """
    check_cuda_untouched(what)
    if device_type == "cuda":
        check_enough_gpus(world_size, what)
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="lmstudy-group-") as folder:
        # The children import no __main__: under the job server it is the server's, not a module of ours.
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            context = mp.start_processes(
                _rank_main,
                args=(target, world_size, device_type, folder, payload),
                nprocs=world_size,
                join=False,
                start_method="spawn",
            )
        finally:
            if main is not None:
                sys.modules["__main__"] = main
        try:
            while not context.join():
                pass
        except mp.ProcessRaisedException as error:
            raise ChildFailed(f"{what} failed in a rank:\n{error}") from None
        except mp.ProcessExitedException as error:
            raise ChildFailed(f"{what}: a rank died ({error})") from None
        results = []
        for rank in range(world_size):
            result = json.loads(Path(folder, f"rank{rank}.json").read_text())
            if "user_error" in result:
                raise UserError(result["user_error"])
            results.append(result["value"])
        return results


def _rank_main(
    rank: int, target: Callable, world_size: int, device_type: str, folder: str, payload: dict
) -> None:
    import torch
    import torch.distributed as dist

    out = Path(folder, f"rank{rank}.json")
    if device_type == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        device = torch.device("cpu")
        # The ranks share the job's cores: one rank's threads each, not every core per rank.
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // world_size))
    dist.init_process_group(
        backend_of(device_type),
        init_method=f"file://{folder}/rendezvous",
        rank=rank,
        world_size=world_size,
        **({"device_id": device} if device_type == "cuda" else {}),
    )
    try:
        value = target(rank, world_size, device, payload)
        out.write_text(json.dumps({"value": value}, default=str))
    except UserError as error:
        out.write_text(json.dumps({"user_error": str(error)}))
    finally:
        dist.destroy_process_group()


def synchronize(device) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_barrier(device) -> None:
    """Every rank here, with nothing queued: the start line of a timed region on all ranks."""
    import torch.distributed as dist

    synchronize(device)
    dist.barrier()
    synchronize(device)
