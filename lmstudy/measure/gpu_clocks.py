"""The GPU's SM clock and power draw now, as nvidia-smi reads them.

The matmul reference (lmstudy.measure.ladder_bench.matmul_reference) records them
right after each of its runs: a rate measured at a throttled clock explains
itself. Where nvidia-smi is absent (a CPU run) or cannot answer, every
value is None: the columns stay, empty.

Torch-free.
"""

from __future__ import annotations

import shutil
import subprocess

QUERY = "--query-gpu=clocks.sm,clocks.max.sm,power.draw"
COLUMNS = ("sm_clock_mhz", "max_sm_clock_mhz", "power_w")


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def parse(text: str) -> dict[str, float | None]:
    """nvidia-smi's answer (the first GPU's line, noheader, nounits) as COLUMNS."""
    lines = [line for line in text.splitlines() if line.strip()]
    cells = lines[0].split(",") if lines else []
    if len(cells) != len(COLUMNS):
        return dict.fromkeys(COLUMNS)
    return {column: _number(cell) for column, cell in zip(COLUMNS, cells, strict=True)}


def read(gpu: str = "") -> dict[str, float | None]:
    """SM clock (MHz), its maximum (MHz) and power draw (W) of `gpu` (an nvidia-smi -i id; "" the first)."""
    if shutil.which("nvidia-smi") is None:
        return dict.fromkeys(COLUMNS)
    command = ["nvidia-smi", QUERY, "--format=csv,noheader,nounits", *(["-i", gpu] if gpu else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return dict.fromkeys(COLUMNS)
    return parse(done.stdout)
