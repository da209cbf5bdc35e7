#!/usr/bin/env python
"""Measure the dense bf16 matmul ceiling of this device, by hand (section 7's reference).

After --warmup-s seconds of products (steady clocks), --bursts bursts of
--burst-products back-to-back bf16 n^3 products for each --n, each burst
timed as a whole; the SM clock and power are sampled by NVML during the
bursts (lmstudy.measure.matmul_ceiling). The ceiling is the highest burst.
In the workflow each ladder rung job measures it on its own GPU right after
its rung (lmstudy measure ladder); this script measures it alone. On a CPU it
measures the CPU's rate.

Example, by hand:
    python scripts/matmul_reference.py --out matmul.csv --n 8192 16384 --bursts 10 --burst-products 20
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmstudy.cli import run_main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of one row per burst")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    p.add_argument("--n", type=int, nargs="+", default=[8192, 16384], help="sizes of the square matrices")
    p.add_argument("--warmup-s", type=float, default=1.5, help="seconds of products before the bursts")
    p.add_argument("--bursts", type=int, default=10)
    p.add_argument("--burst-products", type=int, default=20)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from lmstudy.errors import UserError

    if min(*args.n, args.bursts, args.burst_products) < 1 or args.warmup_s < 0:
        raise UserError("--n, --bursts and --burst-products must be at least 1, --warmup-s at least 0.")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.devices import open_device
    from lmstudy.measure.matmul_ceiling import measure_ceiling, summarize
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    with clock.timing("start"):
        device, env = open_device(args.device)
    with clock.timing("measure"):
        rows = measure_ceiling(args.n, args.warmup_s, args.bursts, args.burst_products, device)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.out, pd.DataFrame([{**row, **env} for row in rows]))
    best = summarize(rows)
    print(f"ceiling {best['ceiling_tflops']:.4g} TFLOP/s at n={best['n']} (median burst "
          f"{best['median_tflops']:.4g}), SM clock during {rows[-1]['sm_clock_mhz']} MHz, "
          f"{rows[-1]['power_w']} W")


if __name__ == "__main__":
    run_main(main)
