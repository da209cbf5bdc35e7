#!/usr/bin/env python
"""Run one of the analysing side's scripts as a fork of a job server that imported pandas,
matplotlib and Jinja2 already (lmstudy.launch.job_server; never torch): those imports cost a second
per job, and the study has dozens of such jobs.

Every CPU rule runs its command through this (the shell function `lmstudy_cpu` of
workflow/rules/common.smk). By hand:
    python scripts/run_script.py -m lmstudy aggregate ...
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from lmstudy.job_process import SettingError
from lmstudy.launch import job_server
from lmstudy.launch.watch import exec_watched


def parse(argv: list[str]) -> list[str]:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="LMSTUDY_JOB_SERVER=0 runs the script as a process of its own.",
    )
    p.add_argument("script", help="the script to run, e.g. scripts/x.py, or -m MODULE (-m lmstudy aggregate)")
    p.add_argument("args", nargs="*", help="its arguments (the script's own --help among them)")
    if argv[:1] == ["-m"] and len(argv) > 1:  # a module, as python -m runs it: -m lmstudy aggregate ...
        return argv
    # The first word that is not an option is the script; everything after it is the script's.
    split = next((i for i, word in enumerate(argv) if not word.startswith("-")), len(argv))
    args = p.parse_args(argv[: split + 1])
    return [args.script, *argv[split + 1:]]


def main(command: list[str]) -> None:
    if job_server.wanted(command):
        try:
            sys.exit(job_server.run(command, dict(os.environ), time.time(), kind="cpu"))
        except job_server.ServerUnavailable as error:
            print(f"job server: {error}; the script runs as a process of its own", file=sys.stderr)
    exec_watched(command, dict(os.environ))


if __name__ == "__main__":
    try:
        main([sys.executable, *parse(sys.argv[1:])])
    except SettingError as error:  # one of our environment variables, said in one sentence
        sys.exit(f"error: {error}")
