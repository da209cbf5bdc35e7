#!/usr/bin/env python
"""Run a GPU job's command holding an exclusive lease on one GPU (lmstudy.gpu_lease).

Every GPU rule runs its script through this (the shell function lmstudy_gpu
of workflow/rules/common.smk). By hand:
    python scripts/gpu_lease.py -- python scripts/time_model.py ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.gpu_lease import LeaseError, run_leased  # noqa: E402

if __name__ == "__main__":
    command = sys.argv[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        sys.exit("usage: gpu_lease.py -- COMMAND [ARGS...]: name the command to run on a leased GPU")
    try:
        run_leased(command)
    except LeaseError as error:
        sys.exit(f"error: {error}")
