#!/usr/bin/env python
"""Time one model configuration for every pass and warm-up count (section 1).

Each pass runs in one fresh process forked from this one (torch imported,
CUDA untouched) that times every step; warm-up w's row is the window of
timed steps after its first w steps.

Example, by hand:
    python scripts/time_model.py --out small_ctx128.csv --size small \
        --d-model 768 --d-ff 3072 --num-layers 12 --num-heads 12 \
        --context-length 128 --precision bf16
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lmstudy.cli import add_model_arguments, compile_from_scratch, model_kwargs, run_main  # noqa: E402

compile_from_scratch()
# This process forks the measuring ones and must not start the CUDA driver:
# should anything ask torch.cuda.is_available() here, NVML answers, not CUDA.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of result rows")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    add_model_arguments(p)
    p.add_argument("--variant", default="naive", choices=["naive", "sdpa", "naive-compile", "sdpa-compile"])
    p.add_argument("--passes", nargs="+", default=["forward", "forward_backward", "train_step"])
    p.add_argument("--warmup-steps", type=int, nargs="+", default=[0, 1, 5])
    p.add_argument("--timed-steps", type=int, default=10)
    p.add_argument("--min-processes", type=int, default=2, help="fresh processes per pass, at least")
    p.add_argument("--max-processes", type=int, default=4,
                   help="fresh processes per pass, at most, while they disagree")
    p.add_argument("--max-spread", type=float, default=0.05,
                   help="measure another process while the processes' medians spread by more (max/min - 1)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.errors import UserError
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.timing import TimingSpec, run_job
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()  # the imports are done: torch is loaded, CUDA untouched

    if not 1 <= args.min_processes <= args.max_processes:
        raise UserError("--min-processes must be at least 1 and at most --max-processes: fix the arguments.")
    spec = TimingSpec(
        **model_kwargs(args), variant=args.variant, passes=tuple(args.passes),
        warmup_steps=tuple(args.warmup_steps), timed_steps=args.timed_steps,
        noise=NoisePolicy(args.min_processes, args.max_processes, args.max_spread),
    )
    rows = run_job(spec, clock)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.out, pd.DataFrame(rows))
    for row in rows:
        print(row["pass"], "warm-up", row["warmup_steps"], row["status"],
              f"median {row['median_ms']:.3f} ms over {row['processes']} processes "
              f"(95% {row['ci_low_ms']:.3f}-{row['ci_high_ms']:.3f}, spread {row['process_spread']:.1%})"
              if row["status"] == "ok" else "")


if __name__ == "__main__":
    run_main(main)
