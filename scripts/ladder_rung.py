#!/usr/bin/env python
"""Time one rung of the training-step ladder for one size (section 7), then the GPU's matmul ceiling.

The workflow runs one such job per size and rung (a fresh process each).
After the rung, the same process measures the dense bf16 matmul ceiling of
the same GPU (lmstudy.measure.matmul_ceiling: bursts of back-to-back products
at steady clocks, the clock sampled during them) into --matmul-out;
scripts/ladder_table.py joins each rung with its own GPU's ceiling. A rung this device cannot run (CUDA
graphs on a CPU, ...) is a row with status "unsupported" and the reason.
scripts/bench_ladder.py runs the same code for every rung at once, by hand.

Example, by hand:
    python scripts/ladder_rung.py --out small_bf16-sdpa.csv --matmul-out small_bf16-sdpa.matmul.csv \
        --size small --rung bf16-sdpa \
        --d-model 768 --d-ff 3072 --num-layers 12 --num-heads 12 --context-length 1024
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lmstudy.cli import (  # noqa: E402
    add_device_arguments,
    add_dimension_arguments,
    add_noise_arguments,
    compile_from_scratch,
    dimension_kwargs,
    fork_measuring_processes,
    noise_policy,
    run_main,
)
from lmstudy.ladder_rungs import RUNGS  # noqa: E402

compile_from_scratch()
fork_measuring_processes()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of the rung's row")
    p.add_argument("--matmul-out", type=Path, required=True, help="CSV of the matmul ceiling's bursts")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    p.add_argument("--size", required=True, help="the size's name, recorded in the row")
    p.add_argument("--rung", required=True, choices=list(RUNGS))
    add_dimension_arguments(p)
    add_device_arguments(p)
    p.add_argument("--warmup-steps", type=int, default=5, help="untimed steps after the first")
    p.add_argument("--timed-steps", type=int, default=20)
    p.add_argument(
        "--profile-steps", type=int, default=0,
        help="after timing, profile this many steps: the rung's GPU time by kernel category",
    )
    add_noise_arguments(p)
    p.add_argument("--matmul-n", type=int, nargs="+", default=[8192, 16384], help="square matmul sizes")
    p.add_argument("--matmul-warmup-s", type=float, default=1.5, help="seconds of products before timing")
    p.add_argument("--matmul-bursts", type=int, default=10, help="timed bursts per size")
    p.add_argument("--matmul-burst-products", type=int, default=20, help="back-to-back products per burst")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from lmstudy.errors import UserError

    if args.timed_steps < 2 or args.warmup_steps < 0 or args.profile_steps < 0:
        raise UserError(
            "--timed-steps must be at least 2, --warmup-steps and --profile-steps at least 0: "
            "fix the arguments."
        )
    policy = noise_policy(args)
    if min(*args.matmul_n, args.matmul_bursts, args.matmul_burst_products) < 1 or args.matmul_warmup_s < 0:
        raise UserError(
            "--matmul-n, --matmul-bursts and --matmul-burst-products must be at least 1, "
            "--matmul-warmup-s at least 0: fix the arguments."
        )
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.ladder_bench import BenchSpec, CeilingSpec, measure_rung_and_ceiling
    from lmstudy.measure.matmul_ceiling import summarize
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()

    spec = BenchSpec(
        rung=args.rung, size=args.size, **dimension_kwargs(args),
        warmup_steps=args.warmup_steps, timed_steps=args.timed_steps, profile_steps=args.profile_steps,
        device=args.device, tf32=args.tf32, memory_cap_gb=args.memory_cap_gb,
    )
    ceiling = CeilingSpec(
        sizes=tuple(args.matmul_n), warmup_s=args.matmul_warmup_s, bursts=args.matmul_bursts,
        burst_products=args.matmul_burst_products,
    )
    row, bursts = measure_rung_and_ceiling(spec, ceiling, policy, clock)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.matmul_out, pd.DataFrame(bursts))
    write_csv(args.out, pd.DataFrame([row]))
    detail = (
        f"median {row['median_ms']:.3f} ms, {row['achieved_tflops']:.3g} TFLOP/s"
        if row["status"] == "ok" else row.get("reason") or row.get("error", "")
    )
    print(f"{args.size} {row['rung']}: {row['status']} {detail}")
    best = summarize(bursts)
    print(f"matmul ceiling {best['ceiling_tflops']:.4g} TFLOP/s at n={best['n']} "
          f"(median burst {best['median_tflops']:.4g})")


if __name__ == "__main__":
    run_main(main)
