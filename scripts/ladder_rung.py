#!/usr/bin/env python
"""Time one rung of the training-step ladder for one size (section 7), in this process.

The workflow runs one such job per size and rung (a fresh process each); the
matmul rate they are compared with is scripts/matmul_reference.py's, and
scripts/ladder_table.py joins the two. A rung this device cannot run (CUDA
graphs on a CPU, ...) is a row with status "unsupported" and the reason.
scripts/bench_ladder.py runs the same code for every rung at once, by hand.

Example, by hand:
    python scripts/ladder_rung.py --out small_bf16-sdpa.csv --size small --rung bf16-sdpa \
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
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.ladder_bench import BenchSpec, measure_rung_in_processes
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()

    spec = BenchSpec(
        rung=args.rung, size=args.size, **dimension_kwargs(args),
        warmup_steps=args.warmup_steps, timed_steps=args.timed_steps, profile_steps=args.profile_steps,
        device=args.device, tf32=args.tf32, memory_cap_gb=args.memory_cap_gb,
    )
    row = measure_rung_in_processes(spec, policy, clock)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.out, pd.DataFrame([row]))
    detail = (
        f"median {row['median_ms']:.3f} ms, {row['achieved_tflops']:.3g} TFLOP/s"
        if row["status"] == "ok" else row.get("reason") or row.get("error", "")
    )
    print(f"{args.size} {row['rung']}: {row['status']} {detail}")


if __name__ == "__main__":
    run_main(main)
