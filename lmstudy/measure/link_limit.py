"""The limit of the link between a job's GPUs, read from the machine (nvidia-smi, which goes through NVML).

The communication section puts the bus bandwidth it measures beside this: per
GPU and per direction, the sum of its active NVLink links' speeds
(`nvidia-smi nvlink -s`) where the GPUs are joined by NVLink (`nvidia-smi topo
-m` says NV<k> between them), else its PCIe link (generation and width
in use, `--query-gpu=pcie.link.gen.current,pcie.link.width.current`). On a CPU,
or without nvidia-smi, the limit is unknown and said so.

Torch-free: the job's process reads it before its ranks start, without CUDA.
"""

from __future__ import annotations

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


def topology_kind(topo_text: str, gpus: int) -> str:
    """How GPU0 reaches the other GPUs in `nvidia-smi topo -m`: "NVLink" where every pair among the
    first `gpus` is NV<k>, else "PCIe" ("" where the matrix cannot be read)."""
    rows = [line.split() for line in topo_text.splitlines() if line.startswith("GPU")]
    if len(rows) < gpus or gpus < 2:
        return ""
    cells = [row[1 : gpus + 1] for row in rows[:gpus]]
    pairs = [cells[i][j] for i in range(gpus) for j in range(gpus) if i != j and j < len(cells[i])]
    if pairs and all(cell.startswith("NV") for cell in pairs):
        return "NVLink"
    return "PCIe"


def _smi(*args: str) -> str:
    if shutil.which("nvidia-smi") is None:
        return ""
    try:
        return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def read(device_type: str, gpus: int) -> dict:
    """The link's limit for a group of `gpus` ranks: {link, link_gbps, link_source}."""
    if device_type != "cuda":
        return {"link": "unknown", "link_gbps": float("nan"), "link_source": "a CPU run: no GPU link"}
    kind = topology_kind(_smi("topo", "-m"), gpus)
    if kind == "NVLink":
        speed = nvlink_gbps(_smi("nvlink", "-s", "-i", "0"))
        if speed > 0:
            return {"link": "NVLink", "link_gbps": speed, "link_source": "nvidia-smi nvlink -s (GPU 0)"}
    rows = _smi("--query-gpu=pcie.link.gen.current,pcie.link.width.current", "--format=csv,noheader,nounits")
    try:
        generation, width = (int(cell) for cell in rows.splitlines()[0].split(","))
    except (IndexError, ValueError):
        return {"link": "unknown", "link_gbps": float("nan"), "link_source": "nvidia-smi did not say"}
    return {
        "link": f"PCIe gen{generation} x{width}",
        "link_gbps": pcie_gbps(generation, width),
        "link_source": "nvidia-smi pcie.link (GPU 0)" + ("" if kind else "; topology unread"),
    }
