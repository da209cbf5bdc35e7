"""The limit of the link between a job's GPUs, read from the machine (nvidia-smi, which goes through NVML).

The communication section puts the bus bandwidth it measures beside this: per
GPU and per direction, the sum of its active NVLink links' speeds
(`nvidia-smi nvlink -s`) where the GPUs are joined by NVLink (`nvidia-smi topo
-m` says NV<k> between them), else its PCIe link (generation and width
in use, `--query-gpu=pcie.link.gen.current,pcie.link.width.current`). On a CPU,
or without nvidia-smi, the limit is unknown and said so.

The GPUs read are the ones the job leased (CUDA_VISIBLE_DEVICES, lmstudy.launch.gpu_lease), not
GPU 0: on a node shared by several jobs, or where GPU 0 is joined differently, the link is the one
between the GPUs the ranks run on.

Torch-free: the job's process reads it before its ranks start, without CUDA.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

# PCIe transfer rate per lane by generation (GT/s), and the line code's efficiency.
PCIE_GT_PER_LANE = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_LINK_SPEED = re.compile(r"Link\s+\d+:\s*([0-9.]+)\s*GB/s", re.IGNORECASE)


def nvlink_gbps(status_text: str) -> float:
    """Per-direction bandwidth of one GPU's active NVLink links (GB/s), from `nvidia-smi nvlink -s -i K`.

    Inactive links ("<inactive>") count nothing; 0.0 for a GPU without NVLink.
    """
    return sum(float(speed) for speed in _LINK_SPEED.findall(status_text))


def pcie_gbps(generation: int, width: int) -> float:
    """A PCIe link's per-direction bandwidth (GB/s): lanes x rate x line-code efficiency / 8 bits."""
    efficiency = 128 / 130 if generation >= 3 else 8 / 10
    return PCIE_GT_PER_LANE.get(generation, float("nan")) * width * efficiency / 8


def topology_kind(topo_text: str, gpus: int | list[int]) -> str:
    """How the GPUs reach each other in `nvidia-smi topo -m`: "NVLink" where every pair among `gpus`
    (their indices, or a count: the first that many) is NV<k>, else "PCIe" ("" where the matrix cannot
    be read)."""
    indices = list(range(gpus)) if isinstance(gpus, int) else list(gpus)
    lines = (line.split() for line in topo_text.splitlines() if line.startswith("GPU"))
    rows = {row[0]: row for row in lines}
    if len(indices) < 2 or any(f"GPU{i}" not in rows for i in indices):
        return ""
    # Row GPU<i>'s cell for GPU<j> is its (1 + j)th: the matrix's columns are GPU0, GPU1, ... in order.
    pairs = [rows[f"GPU{i}"][1 + j] for i in indices for j in indices
             if i != j and 1 + j < len(rows[f"GPU{i}"])]
    if pairs and all(cell.startswith("NV") for cell in pairs):
        return "NVLink"
    return "PCIe"


def leased(gpus: int, environ=os.environ, uuids: str = "") -> list[int]:
    """The physical indices of the job's `gpus` GPUs: the first of CUDA_VISIBLE_DEVICES (the GPU lease,
    lmstudy.launch.gpu_lease; indices or UUIDs, the latter matched in `nvidia-smi
    --query-gpu=index,uuid`'s `uuids`), or 0 to gpus - 1 where it is unset; [] where it cannot be read."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(gpus))
    names = [d.strip() for d in visible.split(",") if d.strip()][:gpus]
    index_of = {}
    for line in uuids.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 2 and cells[0].isdigit():
            index_of[cells[1]] = int(cells[0])
    out = []
    for name in names:
        if name.isdigit():
            out.append(int(name))
        elif name in index_of:
            out.append(index_of[name])
        else:
            return []
    return out


def _smi(*args: str) -> str:
    if shutil.which("nvidia-smi") is None:
        return ""
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def read(device_type: str, gpus: int, environ=os.environ) -> dict:
    """The link's limit for a group of `gpus` ranks on the GPUs this job leased: {link, link_gbps,
    link_source}. The first leased GPU's links stand for all (a node's GPUs have the same)."""
    if device_type != "cuda":
        return {"link": "unknown", "link_gbps": float("nan"), "link_source": "a CPU run: no GPU link"}
    uuids = ""
    if any(not d.strip().isdigit() for d in environ.get("CUDA_VISIBLE_DEVICES", "0").split(",") if d.strip()):
        uuids = _smi("--query-gpu=index,uuid", "--format=csv,noheader")
    indices = leased(gpus, environ, uuids)
    if not indices:
        return {"link": "unknown", "link_gbps": float("nan"),
                "link_source": f"CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES')} not read"}
    first = str(indices[0])
    kind = topology_kind(_smi("topo", "-m"), indices)
    if kind == "NVLink":
        speed = nvlink_gbps(_smi("nvlink", "-s", "-i", first))
        if speed > 0:
            source = f"nvidia-smi nvlink -s (GPU {first})"
            return {"link": "NVLink", "link_gbps": speed, "link_source": source}
    rows = _smi("--query-gpu=pcie.link.gen.current,pcie.link.width.current", "--format=csv,noheader,nounits",
                "-i", first)
    try:
        generation, width = (int(cell) for cell in rows.splitlines()[0].split(","))
    except (IndexError, ValueError):
        return {"link": "unknown", "link_gbps": float("nan"), "link_source": "nvidia-smi did not say"}
    return {
        "link": f"PCIe gen{generation} x{width}",
        "link_gbps": pcie_gbps(generation, width),
        "link_source": f"nvidia-smi pcie.link (GPU {first})" + ("" if kind else "; topology unread"),
    }
