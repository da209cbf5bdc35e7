#!/usr/bin/env python
"""What the job server saves per job: one job's wall time, with it and without.

An analysing job by default; with --gpu a measuring job, through the GPU lease.

Each run is a fresh `python scripts/run_script.py SCRIPT ARGS...`, as the
workflow's CPU rules run it, with LMSTUDY_JOB_SERVER on or off; the two
alternate (on, off, then off, on, ...) so that a neighbour's load falls on
both. The server is started once before the timed runs, and that start is
reported apart: a study pays it once per run of Snakemake, not per job.

    python scripts/bench_job_server.py --out server.csv --repeats 10 -- \\
        -m lmstudy study_cost --out /tmp/cost.csv --benchmarks tests/fixtures/gpu/cost/*/*/*.tsv
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lmstudy.cli import run_main

RUN_SCRIPT = Path(__file__).resolve().parent / "run_script.py"
GPU_LEASE = Path(__file__).resolve().parent / "gpu_lease.py"


def timed_run(command: list[str], env: dict[str, str], gpu: bool = False) -> float:
    """One job's wall time, started as the workflow starts it: a CPU rule's, or with `gpu` a GPU rule's
    (the GPU lease's wrapper, whose job server imported torch)."""
    wrapper = [str(GPU_LEASE), "--", sys.executable] if gpu else [str(RUN_SCRIPT)]
    start = time.perf_counter()
    subprocess.run([sys.executable, *wrapper, *command], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV, one row per run")
    p.add_argument("--repeats", type=int, default=10, help="timed runs with the server, and as many without")
    p.add_argument("--gpu", action="store_true",
                   help="a measuring job, through the GPU lease's wrapper (its server imported torch)")
    p.add_argument("command", nargs="+", help="the script and its arguments, after --")
    args = p.parse_args(argv)
    import pandas as pd

    from lmstudy.atomic import write_csv

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-job-server-") as servers:
        # A server of this benchmark's own, gone soon after it.
        base = {**os.environ, "LMSTUDY_JOB_SERVER_DIR": servers, "LMSTUDY_JOB_SERVER_IDLE_S": "20"}
        on, off = {**base, "LMSTUDY_JOB_SERVER": "1"}, {**base, "LMSTUDY_JOB_SERVER": "0"}
        rows.append({"mode": "server start", "repeat": 0, "wall_s": timed_run(args.command, on, args.gpu)})
        for repeat in range(args.repeats):
            order = [("on", on), ("off", off)] if repeat % 2 == 0 else [("off", off), ("on", on)]
            for mode, env in order:
                wall_s = timed_run(args.command, env, args.gpu)
                rows.append({"mode": mode, "repeat": repeat, "wall_s": wall_s})
                print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    write_csv(args.out, table)
    by_mode = table.groupby("mode")["wall_s"]
    summary = pd.DataFrame({"runs": by_mode.size(), "median_s": by_mode.median(),
                            "q1_s": by_mode.quantile(0.25), "q3_s": by_mode.quantile(0.75)}).round(3)
    print(summary.to_string())
    saved = summary.loc["off", "median_s"] - summary.loc["on", "median_s"]
    print(f"the server saves {saved:.3f} s per job (median off - median on)")


if __name__ == "__main__":
    run_main(main)
