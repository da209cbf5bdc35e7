"""Gather every job's wall time and phases into the cost section's table.

Example, by hand:
    python -m lmstudy study_cost --out results/default/cost/jobs.csv \
        --benchmarks results/default/benchmarks/*/*/*.tsv \
        --phases results/default/benchmarks/*/*/*.phases.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy study_cost"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True, help="CSV, one row per job")
    p.add_argument("--benchmarks", type=Path, nargs="*", default=[], help="Snakemake benchmark records")
    p.add_argument("--phases", type=Path, nargs="*", default=[], help="the measuring jobs' phase records")
    args = p.parse_args(argv)
    from lmstudy.analyse.study_cost import job_table
    from lmstudy.atomic import write_csv

    table = job_table(args.benchmarks, args.phases)
    write_csv(args.out, table)
    print(f"{len(table)} jobs, {table['wall_s'].sum():.1f} s in all -> {args.out}")
