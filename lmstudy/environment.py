"""Provenance recorded with every result: where and how it was measured."""

from __future__ import annotations

import datetime as dt
import os
import platform
import socket
import subprocess
from pathlib import Path

from lmstudy import job_process

REPO_ROOT = Path(__file__).resolve().parent.parent


def git_commit() -> str:
    """The checkout's commit, with '-dirty' when tracked files have changed.

    LMSTUDY_COMMIT, when set, names it instead: for copies of the code
    without their .git folder (a cluster's scratch space, a device sandbox).
    """
    if os.environ.get("LMSTUDY_COMMIT"):
        return os.environ["LMSTUDY_COMMIT"]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def _nvidia_smi_fields(*fields: str) -> list[str]:
    """nvidia-smi's answers for the leased GPU (the first where no lease names one), one per field
    (e.g. driver_version); "" where it cannot answer."""
    gpu = os.environ.get(job_process.INDEX_ENV, "")
    select = ["-i", gpu] if gpu.isdigit() else []
    try:
        out = subprocess.run(
            ["nvidia-smi", *select, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return [""] * len(fields)
    answers = [a.strip() for a in out.strip().splitlines()[0].split(",")] if out.strip() else []
    return answers if len(answers) == len(fields) else [""] * len(fields)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# host_facts() of this process, once asked: measuring processes forked after it inherit it.
_host_facts: dict[str, str] | None = None


def host_facts() -> dict[str, str]:
    """What describe() records that needs no device (the driver by nvidia-smi, not CUDA).

    Asked once per job: the driver, the commit, the CPU and the leased GPU's power limit do not
    change while it runs, and each fresh measuring process it forks (each a describe()) inherits
    the answer instead of starting nvidia-smi and git again. One nvidia-smi call for both fields.
    """
    global _host_facts
    if _host_facts is None:
        driver, limit = _nvidia_smi_fields("driver_version", "power.limit")
        _host_facts = {"driver": driver, "commit": git_commit(), "cpu": cpu_model(),
                       "gpu_power_limit_w": limit if limit.replace(".", "", 1).isdigit() else ""}
    return dict(_host_facts)


def describe(device, facts: dict[str, str] | None = None) -> dict[str, str | bool]:
    """The environment of a measurement, as flat columns for a result row (`device`: a torch.device).

    `facts`: host_facts(), when the caller already has them. torch is
    imported here, not at module level: the report side reads
    ENVIRONMENT_COLUMNS and REPO_ROOT without loading torch.
    """
    import torch

    facts = facts or host_facts()
    if device.type == "cuda":
        gpu = torch.cuda.get_device_name(device)
        driver = facts["driver"]
        cuda = torch.version.cuda or ""
        # The whole GPU's memory: the report says what would not fit a smaller one.
        memory = torch.cuda.get_device_properties(device).total_memory
    else:
        gpu, driver, cuda = f"cpu ({platform.processor() or platform.machine()})", "", ""
        memory = None
    return {
        "cpu": facts.get("cpu") or cpu_model(),
        "gpu_power_limit_w": facts.get("gpu_power_limit_w", "") if device.type == "cuda" else "",
        "gpu": gpu,
        "driver": driver,
        "cuda": cuda,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "commit": facts["commit"],
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "gpu_memory_bytes": memory,
        # Which GPU of the machine, how it was chosen (lmstudy.launch.gpu_lease), and
        # processes not ours that shared it.
        **job_process.lease_facts(),
    }


ENVIRONMENT_COLUMNS = (
    # The measured model (config model:), in the rows of the sections that measure it.
    "model",
    "gpu", "gpu_power_limit_w", "cpu", "driver", "cuda", "torch", "python", "host", "commit", "date",
    "tf32_matmul", "tf32_cudnn", *job_process.lease_facts(),
)
