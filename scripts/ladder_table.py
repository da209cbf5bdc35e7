#!/usr/bin/env python
"""Join the ladder's rung rows with the matmul reference of the same run into one table (section 7).

Every rung's row gets the run's matmul rates and its share of the reference,
the highest of them (lmstudy.analyse.ladder_table). No torch: it runs on any CPU.

    python scripts/ladder_table.py --out results/default/ladder/ladder.csv \
        --matmul results/default/ladder/matmul.csv results/default/ladder/raw/*.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--matmul", type=Path, required=True, help="the matmul reference's CSV")
    p.add_argument("rungs", type=Path, nargs="+", help="the rung jobs' CSVs, in the ladder's order")
    args = p.parse_args(argv)
    from lmstudy.analyse.ladder_table import join
    from lmstudy.analyse.result_files import read_csv, read_csvs
    from lmstudy.atomic import write_csv

    table = join(read_csvs(args.rungs), read_csv(args.matmul))
    write_csv(args.out, table)
    print(f"{len(table)} rung rows from {len(args.rungs)} files, reference "
          f"{table['matmul_tflops'].iloc[0]:.3g} TFLOP/s -> {args.out}")


if __name__ == "__main__":
    run_main(main)
