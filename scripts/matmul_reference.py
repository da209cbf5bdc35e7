#!/usr/bin/env python
"""Measure the dense bf16 n^3 matrix-multiply rate of this device: the ladder's reference (section 7).

A burst of `--burst-repeats` products, then a sustained run of
`--sustained-repeats`; after each, the SM clock and power draw as
nvidia-smi reads them (empty where it cannot). On a CPU it measures the
CPU's rate. scripts/ladder_table.py takes the higher of the two as the rate
each rung is a share of.

Example, by hand:
    python scripts/matmul_reference.py --out matmul.csv --n 8192 --burst-repeats 50 --sustained-repeats 1000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lmstudy.cli import run_main  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of one row per run (burst, sustained)")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    p.add_argument("--n", type=int, default=8192, help="size of the square bf16 matrices")
    p.add_argument("--burst-repeats", type=int, default=50)
    p.add_argument("--sustained-repeats", type=int, default=1000)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from lmstudy.errors import UserError

    if min(args.n, args.burst_repeats, args.sustained_repeats) < 1:
        raise UserError("--n, --burst-repeats and --sustained-repeats must be at least 1: fix the arguments.")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.ladder_bench import matmul_reference
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    rows = matmul_reference(args.n, args.burst_repeats, args.sustained_repeats, args.device, clock)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.out, pd.DataFrame(rows))
    for row in rows:
        print(f"{row['kind']}: {row['n']}^3 x {row['repeats']}: {row['tflops']:.3g} TFLOP/s, "
              f"SM clock {row['sm_clock_mhz']} MHz, {row['power_w']} W")


if __name__ == "__main__":
    run_main(main)
