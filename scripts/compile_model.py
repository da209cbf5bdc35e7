#!/usr/bin/env python
"""Time the whole model eager and under torch.compile, per pass (section 6).

Eager first, then compiled, from the same initial weights; the compiled
model's first step (trace and compile) is recorded apart from its steady state.

Example, by hand:
    python scripts/compile_model.py --out small_bf16.csv --size small \
        --d-model 768 --d-ff 3072 --num-layers 12 --num-heads 12 \
        --context-length 512 --precision bf16
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lmstudy.cli import (  # noqa: E402
    add_model_arguments,
    add_noise_arguments,
    compile_from_scratch,
    fork_measuring_processes,
    model_kwargs,
    noise_policy,
    run_main,
)

compile_from_scratch()
fork_measuring_processes()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of result rows")
    add_model_arguments(p)
    p.add_argument("--attention", choices=["naive", "sdpa"], default="naive")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    p.add_argument(
        "--passes",
        nargs="+",
        choices=["forward", "forward_backward", "train_step"],
        default=["forward", "train_step"],
    )
    p.add_argument("--warmup-steps", type=int, default=5, help="untimed steps after the first")
    p.add_argument("--timed-steps", type=int, default=10)
    add_noise_arguments(p)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from lmstudy.errors import UserError

    if args.timed_steps < 2 or args.warmup_steps < 0:
        raise UserError("--timed-steps must be at least 2 and --warmup-steps at least 0: fix the arguments.")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.compile_bench import CompileSpec, run_job_in_processes
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()

    spec = CompileSpec(
        **model_kwargs(args),
        attention=args.attention,
        passes=tuple(args.passes),
        warmup_steps=args.warmup_steps,
        timed_steps=args.timed_steps,
    )
    rows = run_job_in_processes(spec, noise_policy(args), clock)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.out, pd.DataFrame(rows))
    for row in rows:
        detail = (
            f"first {row['first_step_ms']:.1f} ms, median {row['median_ms']:.3f} ms"
            if row["status"] == "ok"
            else row.get("error", "")
        )
        print(f"{row['mode']} {row['pass']}: {row['status']} {detail}")


if __name__ == "__main__":
    run_main(main)
