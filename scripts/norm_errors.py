#!/usr/bin/env python
"""Measure which operation inside RMSNorm and LayerNorm loses precision in fp16 and bf16 (section 3 b).

Builds the study model of one size (random weights), runs one forward pass in fp32 on random
tokens, takes the residual stream entering its final norm, and writes the error of RMSNorm
and LayerNorm against fp32: every operation in the low precision, one operation at a time,
and as the model computes it (fp32 inside). See lmstudy/measure/norm_precision.py.

    python scripts/norm_errors.py --device cpu --out norm_errors.csv --size tiny \
        --d-model 64 --d-ff 256 --num-layers 2 --num-heads 4 --context-length 32 --batch-size 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import add_dimension_arguments, run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of the errors")
    p.add_argument("--size", required=True, help="the size's name, recorded in the rows")
    add_dimension_arguments(p)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument(
        "--scales",
        type=float,
        nargs="+",
        default=[1.0, 100.0],
        help="multiples of the activations to test (large values overflow fp16)",
    )
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    args = p.parse_args(argv)
    import pandas as pd
    import torch

    from lmstudy.atomic import write_csv
    from lmstudy.measure import norm_precision
    from lmstudy.measure.devices import open_device
    from lmstudy.measure.model import ModelConfig, TransformerLM
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    with clock.timing("start"):
        device, env = open_device(args.device)
    with clock.timing("measure"):
        torch.manual_seed(0)
        config = ModelConfig(
            vocab_size=args.vocab_size,
            context_length=args.context_length,
            d_model=args.d_model,
            d_ff=args.d_ff,
            num_layers=args.num_layers,
            num_heads=args.num_heads,
        )
        model = TransformerLM(config).to(device)
        tokens = torch.randint(args.vocab_size, (args.batch_size, args.context_length), device=device)
        x = norm_precision.model_activations(model, tokens)
        rows = norm_precision.norm_errors(x, scales=tuple(args.scales))
    if args.phases:
        clock.write(args.phases)
    where = {
        "size": args.size,
        "d_model": args.d_model,
        "context_length": args.context_length,
        "batch_size": args.batch_size,
        "device": device.type,
    }
    write_csv(args.out, pd.DataFrame([{**where, **row, **env} for row in rows]))
    for row in rows:
        if row["low_precision_op"] == norm_precision.ALL and row["scale"] == 1.0:
            print(f"{row['norm']} {row['precision']}: mean error {row['error_mean']:.2e}")


if __name__ == "__main__":
    run_main(main)
