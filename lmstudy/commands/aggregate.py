"""Concatenate per-job result CSVs into one tidy table.

python -m lmstudy aggregate --out results/default/timing/timing.csv results/default/timing/raw/*.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy aggregate"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--min-gpu-busy",
        type=float,
        help="flag rows whose GPU busy share is below this as host-bound (timing)",
    )
    p.add_argument(
        "--max-spread",
        type=float,
        help="flag rows whose processes' medians spread by more than this as noisy (timing)",
    )
    p.add_argument("inputs", type=Path, nargs="+")
    args = p.parse_args(argv)
    from lmstudy.analyse.tables import concat_results
    from lmstudy.analyse.trust import flag_rows
    from lmstudy.atomic import write_csv

    table = concat_results(args.inputs)
    if args.min_gpu_busy is not None and args.max_spread is not None:
        table = flag_rows(table, args.min_gpu_busy, args.max_spread)
    write_csv(args.out, table)
    print(f"{len(table)} rows from {len(args.inputs)} files -> {args.out}")
