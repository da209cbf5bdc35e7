"""Which CPU cores a leased GPU job runs on: its own share, nearest its GPU.

So that a launch-bound model is not slowed by a neighbour on its cores, nor
(the expectation) by running on the socket away from its GPU, each leased GPU gets an
equal share of the cores this run may use: of its NUMA node's cores (the
kernel's local_cpulist of the GPU's PCI device), shared among the GPUs of
that node; where the machine does not say, an equal share by the GPU's place
among the machine's GPUs. Whole cores either way: a core's hardware threads
stay together. lmstudy.launch.gpu_lease pins the job to them.

A GPU here is anything hashable with a `bus_id` (lmstudy.launch.gpu_lease.Gpu).
Its benefit over no pinning is unmeasured: LMSTUDY_CPU_PINNING=0 turns it off,
for the measurement on a multi-socket GPU node that docs/gpus.md describes.
"""

from __future__ import annotations

import os
from pathlib import Path

from lmstudy.job_process import env_switch

PINNING_ENV = "LMSTUDY_CPU_PINNING"


def pinning_wanted(environ=os.environ) -> bool:
    """Whether leased jobs are pinned to their share of the cores (LMSTUDY_CPU_PINNING=0: not)."""
    return env_switch(environ, PINNING_ENV)


def core_share(cores: list[int], slot: int, slots: int) -> list[int]:
    """The slot-th of `slots` equal, contiguous runs of `cores` (in the order given), at least one core."""
    if slots <= 1 or not cores:
        return cores
    if len(cores) < slots:
        return [cores[slot % len(cores)]]
    per = len(cores) // slots
    return cores[slot * per:(slot + 1) * per]


def cpu_slot(gpu, slot: int, gpus: list, listed: list) -> tuple[int, int]:
    """(slot, slots) of the leased `gpu`, the slot-th of `gpus`, among the machine's GPUs, for core_share.

    Among every GPU of the machine, not only those this run may use: two runs
    limited to other GPUs (LMSTUDY_GPUS) then get other cores too.
    """
    if gpu in listed:
        return listed.index(gpu), len(listed)
    return slot, len(gpus)


SYSFS = Path("/sys")


def parse_cpulist(text: str) -> list[int]:
    """[0, 1, 2, 3, 8] for the kernel's "0-3,8"."""
    cpus = []
    for part in text.strip().split(","):
        if "-" in part:
            first, last = part.split("-")
            cpus.extend(range(int(first), int(last) + 1))
        elif part:
            cpus.append(int(part))
    return cpus


def local_cpus(gpu, sysfs: Path = SYSFS) -> list[int]:
    """The CPUs nearest the GPU (its NUMA node's), as the kernel lists them for its PCI device; []
    where unknown."""
    if ":" not in gpu.bus_id:
        return []
    domain, rest = gpu.bus_id.lower().split(":", 1)
    try:
        text = (sysfs / "bus/pci/devices" / f"{domain[-4:]}:{rest}" / "local_cpulist").read_text()
        return parse_cpulist(text)
    except (OSError, ValueError):
        return []


def sibling_order(cpus: list[int], sysfs: Path = SYSFS) -> list[int]:
    """The CPUs with each core's hardware threads side by side (the kernel numbers them apart), so
    that an equal run of them is whole cores."""
    def key(cpu: int) -> tuple[int, int, int]:
        topology = sysfs / f"devices/system/cpu/cpu{cpu}/topology"
        try:
            return (int((topology / "physical_package_id").read_text()),
                    int((topology / "core_id").read_text()), cpu)
        except (OSError, ValueError):
            return (0, cpu, cpu)

    return sorted(cpus, key=key)


def cores_for(gpu, slot: int, gpus: list, listed: list, allowed: list[int], sysfs: Path = SYSFS) -> list[int]:
    """The leased `gpu`'s own share of the cores this run may use (it is the slot-th of `gpus`).

    The CPUs nearest the GPU, shared equally among the GPUs that have the same
    nearest CPUs (one NUMA node's); where the machine does not say, an equal
    share by the GPU's place among the machine's GPUs (cpu_slot). Whole cores
    either way: a core's hardware threads stay together.
    """
    allowed_set = set(allowed)
    near = {other: set(local_cpus(other, sysfs)) & allowed_set for other in listed}
    mine = near.get(gpu)
    if mine:
        group = [other for other in listed if near[other] == mine]
        return core_share(sibling_order(sorted(mine), sysfs), group.index(gpu), len(group))
    return core_share(sibling_order(sorted(allowed), sysfs), *cpu_slot(gpu, slot, gpus, listed))


def cores_text(cores: list[int]) -> str:
    """0-3,8 for [0, 1, 2, 3, 8]."""
    spans, start, prev = [], None, None
    for core in sorted(cores):
        if start is None:
            start = prev = core
        elif core == prev + 1:
            prev = core
        else:
            spans.append((start, prev))
            start = prev = core
    if start is not None:
        spans.append((start, prev))
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
