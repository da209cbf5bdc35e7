#!/usr/bin/env python
"""Measure which operation inside RMSNorm and LayerNorm loses precision in fp16 and bf16 (section 3 b).

Builds the study model of one size (random weights), runs one forward pass in fp32 on random
tokens, takes the residual stream entering its final norm, and writes the error of RMSNorm
and LayerNorm against fp32: every operation in the low precision, one operation at a time,
and as the model computes it (fp32 inside). See lmstudy/measure/norm_precision.py.

    python scripts/norm_errors.py --out norm_errors.csv --preset smoke --spec '{"size": "tiny"}'

"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import add_spec_arguments, read_spec, run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of the errors")
    add_spec_arguments(p, "norms")
    p.add_argument(
        "--scales",
        type=float,
        nargs="+",
        default=[1.0, 100.0],
        help="multiples of the activations to test (large values overflow fp16)",
    )
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    args = p.parse_args(argv)
    spec = argparse.Namespace(**read_spec(args, "norms"))
    import pandas as pd
    import torch

    from lmstudy.atomic import write_csv
    from lmstudy.measure import norm_precision
    from lmstudy.measure.devices import open_device
    from lmstudy.measure.model import ModelConfig, TransformerLM
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    with clock.timing("start"):
        device, env = open_device(spec.device)
    with clock.timing("measure"):
        torch.manual_seed(0)
        config = ModelConfig(
            vocab_size=spec.vocab_size,
            context_length=spec.context_length,
            d_model=spec.d_model,
            d_ff=spec.d_ff,
            num_layers=spec.num_layers,
            num_heads=spec.num_heads,
        )
        model = TransformerLM(config).to(device)
        tokens = torch.randint(spec.vocab_size, (spec.batch_size, spec.context_length), device=device)
        x = norm_precision.model_activations(model, tokens)
        rows = norm_precision.norm_errors(x, scales=tuple(args.scales))
    if args.phases:
        clock.write(args.phases)
    where = {
        "size": spec.size,
        "d_model": spec.d_model,
        "context_length": spec.context_length,
        "batch_size": spec.batch_size,
        "device": device.type,
    }
    write_csv(args.out, pd.DataFrame([{**where, **row, **env} for row in rows]))
    for row in rows:
        if row["low_precision_op"] == norm_precision.ALL and row["scale"] == 1.0:
            print(f"{row['norm']} {row['precision']}: mean error {row['error_mean']:.2e}")


if __name__ == "__main__":
    run_main(main)
