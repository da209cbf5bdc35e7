#!/usr/bin/env python
"""Run one of the analysing side's scripts as a fork of a job server that imported pandas,
matplotlib and Jinja2 already (lmstudy.job_server; never torch): those imports cost a second
per job, and the study has dozens of such jobs.

Every CPU rule runs its script through this (the shell function `lmstudy` of
workflow/rules/common.smk). By hand:
    python scripts/run_script.py scripts/aggregate.py ...
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy import job_server  # noqa: E402

if __name__ == "__main__":
    if not sys.argv[1:]:
        sys.exit("usage: run_script.py SCRIPT [ARGS...]: name the script to run")
    command = [sys.executable, *sys.argv[1:]]
    if job_server.wanted(command):
        try:
            sys.exit(job_server.run(command, dict(os.environ), time.time(), kind="cpu"))
        except job_server.ServerUnavailable as error:
            print(f"job server: {error}; the script runs as a process of its own", file=sys.stderr)
    os.execv(sys.executable, command)
