"""Join the ladder's rung rows with the matmul ceiling of each rung's GPU into one table (section 7).

Every rung's row gets the ceiling its own job measured on its GPU and its
share of it (lmstudy.analyse.ladder_table); every burst of every rung job goes
into --matmul-out, the section's table of ceilings. No torch: it runs on any CPU.

    python -m lmstudy ladder_table --out results/default/ladder/ladder.csv \
        --matmul-out results/default/ladder/matmul.csv \
        --matmul results/default/ladder/raw_matmul/*.csv --rungs results/default/ladder/raw/*.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy ladder_table"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--matmul-out", type=Path, required=True, help="CSV of every rung job's matmul bursts")
    p.add_argument("--matmul", type=Path, nargs="+", required=True, help="the rung jobs' matmul CSVs")
    p.add_argument("--rungs", type=Path, nargs="+", required=True, help="the rung jobs' CSVs, in order")
    p.add_argument(
        "--min-gpu-busy",
        type=float,
        help="flag rungs whose GPU busy share of the step is below this as host-bound",
    )
    p.add_argument(
        "--max-spread",
        type=float,
        help="flag rungs whose processes' medians spread by more than this as noisy",
    )
    args = p.parse_args(argv)
    from lmstudy.analyse.ladder_table import join
    from lmstudy.analyse.result_files import read_csvs
    from lmstudy.analyse.trust import flag_rows
    from lmstudy.atomic import write_csv

    matmul = read_csvs(args.matmul)
    table = join(read_csvs(args.rungs), matmul)
    if args.min_gpu_busy is not None and args.max_spread is not None:
        table = flag_rows(table, args.min_gpu_busy, args.max_spread)
    write_csv(args.matmul_out, matmul)
    write_csv(args.out, table)
    print(
        f"{len(table)} rung rows from {len(args.rungs)} files, ceilings "
        f"{table['matmul_tflops'].min():.4g} to {table['matmul_tflops'].max():.4g} TFLOP/s -> {args.out}"
    )
