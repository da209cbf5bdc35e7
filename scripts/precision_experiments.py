#!/usr/bin/env python
"""Run the mixed-precision experiments (section 3) and write their tables.

- accumulation: 0.01 added a thousand times, fp32 into fp32, fp16 into fp16,
  fp16 into an fp32 accumulator, fp16 upcast then added; result and error;
- toy-model dtypes: a toy model under fp16 and bf16 autocast, the dtype of
  every parameter, layer output, the logits, the loss and the gradients, as
  observed at run time ("not run" where the device lacks the autocast dtype);
- the study model's dtypes (--model-dtypes): the same for the model config.yaml
  names (model:, the built-in one by default) at the spec's size and context,
  each module's output down to model.range_depth (at most 3), by forward hooks.

    python scripts/precision_experiments.py --preset smoke --spec '{"device": "cpu"}' \
        --accumulation accumulation.csv --dtypes toy_dtypes.csv --model-dtypes model_dtypes.csv
    python scripts/precision_experiments.py --preset smoke \
        --spec '{"model": "tests/fixtures/models/encoder_lm.py:build"}' \
        --accumulation accumulation.csv --dtypes toy_dtypes.csv --model-dtypes model_dtypes.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import add_spec_arguments, read_spec, run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_arguments(p, "precision")
    p.add_argument("--accumulation", type=Path, required=True, help="CSV of the accumulation rows")
    p.add_argument("--dtypes", type=Path, required=True, help="CSV of the toy model's dtypes")
    p.add_argument("--model-dtypes", type=Path, help="CSV of the study model's dtypes (optional)")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    args = p.parse_args(argv)
    spec = read_spec(args, "precision")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure import precision
    from lmstudy.measure.devices import open_device
    from lmstudy.measure.model import ModelConfig
    from lmstudy.model_choice import ModelChoice
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    with clock.timing("start"):
        device, env = open_device(spec["device"], spec["tf32"])
    with clock.timing("measure"):
        accumulation, dtypes = precision.run_all(device)
        if args.model_dtypes:
            choice = ModelChoice.coerce(spec["model"])
            config = ModelConfig(vocab_size=spec["vocab_size"], context_length=spec["context_length"],
                                 d_model=spec["d_model"], d_ff=spec["d_ff"], num_layers=spec["num_layers"],
                                 num_heads=spec["num_heads"])
            model_rows = precision.run_model(choice, config, device, spec["batch_size"])
    if args.phases:
        clock.write(args.phases)
    write_csv(
        args.accumulation, pd.DataFrame([{**row, "device": device.type, **env} for row in accumulation])
    )
    write_csv(args.dtypes, pd.DataFrame([{**row, "device": device.type, **env} for row in dtypes]))
    if args.model_dtypes:
        where = {"model": choice.label, "size": spec["size"], "context_length": spec["context_length"],
                 "depth": precision.dtype_depth(choice.range_depth), "device": device.type}
        write_csv(args.model_dtypes, pd.DataFrame([{**where, **row, **env} for row in model_rows]))
    for row in accumulation:
        print(f"{row['method']}: {row['result']:.6f} (error {row['abs_error']:.2e})")


if __name__ == "__main__":
    run_main(main)
