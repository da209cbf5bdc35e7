#!/usr/bin/env python
"""Run a GPU job's command holding an exclusive lease on one GPU (lmstudy.launch.gpu_lease).

Every GPU rule runs its script through this (the shell function lmstudy_gpu
of workflow/rules/common.smk). By hand:
    python scripts/gpu_lease.py -- python -m lmstudy measure timing ...
"""

from __future__ import annotations

import argparse
import sys

from lmstudy.job_process import SettingError
from lmstudy.launch.gpu_lease import LeaseError, run_leased


def parse(argv: list[str]) -> list[str]:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Which GPUs: LMSTUDY_GPUS (nvidia-smi indices), else every GPU nvidia-smi lists; "
        "the leases live in LMSTUDY_GPU_LEASE_DIR (default /tmp/lmstudy-gpu-leases).",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run on the leased GPU, after --")
    # Only what comes before the command is ours: the command's own --help is the command's.
    ours, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    command = p.parse_args(ours).command + rest
    if not command:
        p.error("name the command to run on a leased GPU: gpu_lease.py -- COMMAND [ARGS...]")
    return command


if __name__ == "__main__":
    command = parse(sys.argv[1:])
    try:
        run_leased(command)
    except (LeaseError, SettingError) as error:
        sys.exit(f"error: {error}")
    except OSError as error:  # the command itself could not be started
        sys.exit(f"error: cannot run {command[0]!r}: {error.strerror}; name a program on PATH after --")
