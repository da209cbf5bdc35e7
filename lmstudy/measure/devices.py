"""Pick the device a job measures on, and refuse a GPU preset without one."""

from __future__ import annotations

import contextlib

import torch

from lmstudy.errors import UserError
from lmstudy.measure.device_clock import synchronize

NO_CUDA = (
    "CUDA is not available on this machine, so this GPU measurement cannot run here: "
    "run the CPU smoke study with `snakemake --cores 2 --config preset=smoke` "
    "(or, by hand, give a script \"device\": \"cpu\" in its spec, or --device cpu where it takes flags)."
)


def require_cuda() -> None:
    """UserError(NO_CUDA) unless a CUDA device is there."""
    if not torch.cuda.is_available():
        raise UserError(NO_CUDA)


def resolve_device(name: str, tf32: bool = False) -> torch.device:
    """Return the torch device for `name` ('cuda' or 'cpu') and set TF32.

    TF32 is set explicitly either way, so that a result never depends on a
    library default that changed between PyTorch releases.
    """
    if name == "cuda":
        require_cuda()
    if name not in ("cuda", "cpu"):
        raise UserError(f"device must be 'cuda' or 'cpu', not {name!r}: fix `device` in config.yaml.")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    return torch.device(name)


def open_device(name: str, tf32: bool = False, memory_cap_gb: float | None = None, facts: dict | None = None):
    """A measuring job's device, ready: resolved (TF32 set), CUDA initialised, capped; and its
    environment columns (lmstudy.environment.describe, with the caller's host facts if given)."""
    from lmstudy import environment

    device = resolve_device(name, tf32)
    initialize_device(device)
    apply_memory_cap(device, memory_cap_gb)
    return device, environment.describe(device, facts)


def initialize_device(device: torch.device) -> None:
    """Create the CUDA context now, so that its cost is counted apart from what comes next."""
    if device.type == "cuda":
        torch.zeros(1, device=device)
        synchronize(device)


class OutOfMemory:
    """What an `out_of_memory_is_a_result` block ran into: nothing (false), or out of memory.

    It keeps the error's first line, not the error: the error's traceback
    would hold the failed step's tensors, and the memory with them.
    """

    def __init__(self) -> None:
        self.message: str | None = None
        self.trajectory = None  # what the block had measured before, if it said (lmstudy.measure.timing)

    def __bool__(self) -> bool:
        return self.message is not None

    def fields(self) -> dict:
        """The columns of an out-of-memory result: status OOM and the error's first line."""
        return {"status": "OOM", "error": self.message}


@contextlib.contextmanager
def out_of_memory_is_a_result(device: torch.device | None = None):
    """Run the block; out of memory ends it as a result, anything else is raised.

    The one place where a measuring job tells out-of-memory (a result: "OOM"
    in the tables) from a failure. Yields an `OutOfMemory`, true after one;
    the device's cached memory is freed then, so the next configuration starts clean.
    """
    caught = OutOfMemory()
    try:
        yield caught
    except Exception as error:  # noqa: BLE001 - OOM is a result, the rest re-raised
        if not is_out_of_memory(error):
            raise
        caught.message = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        caught.trajectory = getattr(error, "trajectory", None)
    if caught and device is not None:
        free_memory(device)


def is_out_of_memory(error: BaseException) -> bool:
    """True for a CUDA out-of-memory error or a failed CPU allocation."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and (
        "out of memory" in text
        or "DefaultCPUAllocator: can't allocate memory" in text
        or "DefaultCPUAllocator: not enough memory" in text
    )


def free_memory(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def apply_memory_cap(device: torch.device, cap_gb: float | None) -> None:
    """Cap this process's share of the GPU at `cap_gb` GiB (no-op off CUDA or without a cap)."""
    if cap_gb and device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gb * 2**30 / total), device)
