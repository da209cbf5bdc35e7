"""Gather section 2's per-job tables (kernels.csv, ranges.csv, run.json beside
each other in every job directory) into OUT_DIR/kernels.csv, ranges.csv, runs.csv.

    python -m lmstudy aggregate_nsys --out-dir results/default/nsys \
        --records results/default/nsys/raw/*/*/run.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy aggregate_nsys"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--records", type=Path, nargs="+", required=True, help="the jobs' run.json")
    args = p.parse_args(argv)
    from lmstudy.analyse.nsys.aggregate import aggregate

    print(aggregate(args.records, args.out_dir))
