#!/usr/bin/env python
"""Time one attention implementation at one head size over sequence lengths (section 5).

Batch x 1 head x seq x d inputs, causal; `--steps` forwards and `--steps`
backwards after `--warmup` forward+backward steps, the memory in use before
the backward, and the SDPA backend used. Out-of-memory is a result row.

Example, by hand:
    python scripts/attention_sweep.py --out naive_fp32_d64.csv --implementation naive \
        --precision fp32 --head-dim 64 --seq-lens 256 1024 4096
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lmstudy.cli import (  # noqa: E402
    add_device_arguments,
    add_noise_arguments,
    compile_from_scratch,
    fork_measuring_processes,
    noise_policy,
    run_main,
)

compile_from_scratch()
fork_measuring_processes()

IMPLEMENTATIONS = ["naive", "naive-compile", "sdpa"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of result rows, one per sequence length")
    p.add_argument("--implementation", choices=IMPLEMENTATIONS, required=True)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="dtype of q, k, v")
    p.add_argument("--head-dim", type=int, required=True)
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    p.add_argument("--seq-lens", type=int, nargs="+", required=True)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=100, help="timed forwards, and timed backwards")
    p.add_argument("--warmup", type=int, default=10, help="untimed forward+backward steps first")
    add_device_arguments(p, memory_cap_help="cap on GPU memory; going over it is recorded as OOM")
    add_noise_arguments(p)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from lmstudy.errors import UserError

    if args.steps < 2 or args.warmup < 0 or min(args.seq_lens) < 1 or args.head_dim < 1:
        raise UserError(
            "--steps must be at least 2, --warmup at least 0, and sizes positive: fix the arguments."
        )
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.attention import SweepSpec, run_sweep_in_processes
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()

    spec = SweepSpec(
        implementation=args.implementation,
        precision=args.precision,
        head_dim=args.head_dim,
        seq_lens=tuple(args.seq_lens),
        batch_size=args.batch_size,
        steps=args.steps,
        warmup=args.warmup,
        device=args.device,
        tf32=args.tf32,
        memory_cap_gb=args.memory_cap_gb,
    )
    rows = run_sweep_in_processes(spec, noise_policy(args), clock)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.out, pd.DataFrame(rows))
    for row in rows:
        detail = (
            f"forward {row['forward_median_ms']:.3f} ms, backward {row['backward_median_ms']:.3f} ms"
            if row["status"] == "ok"
            else row.get("error", "")
        )
        print(
            f"{args.implementation} {args.precision} d={args.head_dim} seq={row['seq_len']}: "
            f"{row['status']} {detail}"
        )


if __name__ == "__main__":
    run_main(main)
