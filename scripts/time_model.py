#!/usr/bin/env python
"""Time one model configuration for every pass and warm-up count (section 1).

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
# Compile time is measured: an inductor cache warmed by an earlier run would
# hide it, so compile from scratch (children inherit this).
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

from lmstudy.cli import run_main  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of result rows")
    p.add_argument("--size", required=True, help="the size's name, recorded in the rows")
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--d-ff", type=int, required=True)
    p.add_argument("--num-layers", type=int, required=True)
    p.add_argument("--num-heads", type=int, required=True)
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--precision", choices=["fp32", "bf16"], required=True)
    p.add_argument("--variant", default="naive", choices=["naive", "sdpa", "naive-compile", "sdpa-compile"])
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=10000)
    p.add_argument("--passes", nargs="+", default=["forward", "forward_backward", "train_step"])
    p.add_argument("--warmup-steps", type=int, nargs="+", default=[0, 1, 5])
    p.add_argument("--timed-steps", type=int, default=10)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 matrix products")
    p.add_argument("--memory-cap-gb", type=float, default=None)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.timing import TimingSpec, run_job

    spec = TimingSpec(
        size=args.size, d_model=args.d_model, d_ff=args.d_ff, num_layers=args.num_layers,
        num_heads=args.num_heads, context_length=args.context_length,
        batch_size=args.batch_size, vocab_size=args.vocab_size, precision=args.precision,
        variant=args.variant, passes=tuple(args.passes), warmup_steps=tuple(args.warmup_steps),
        timed_steps=args.timed_steps, device=args.device, tf32=args.tf32,
        memory_cap_gb=args.memory_cap_gb,
    )
    rows = run_job(spec)
    write_csv(args.out, pd.DataFrame(rows))
    for row in rows:
        print(row["pass"], "warm-up", row["warmup_steps"], row["status"],
              f"median {row.get('median_ms', float('nan')):.3f} ms" if row["status"] == "ok" else "")


if __name__ == "__main__":
    run_main(main)
