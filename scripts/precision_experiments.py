#!/usr/bin/env python
"""Run the mixed-precision experiments (section 3) and write two tables.

- accumulation: 0.01 added a thousand times, fp32 into fp32, fp16 into fp16,
  fp16 into an fp32 accumulator, fp16 upcast then added; result and error;
- toy-model dtypes: a toy model under fp16 and bf16 autocast, the dtype of
  every parameter, layer output, the logits, the loss and the gradients, as
  observed at run time ("not run" where the device lacks the autocast dtype).

    python scripts/precision_experiments.py --spec '{"device": "cpu"}' \
        --accumulation accumulation.csv --dtypes toy_dtypes.csv
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
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    args = p.parse_args(argv)
    spec = read_spec(args, "precision")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure import precision
    from lmstudy.measure.devices import open_device
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()
    with clock.timing("start"):
        device, env = open_device(spec["device"], spec["tf32"])
    with clock.timing("measure"):
        accumulation, dtypes = precision.run_all(device)
    if args.phases:
        clock.write(args.phases)
    write_csv(
        args.accumulation, pd.DataFrame([{**row, "device": device.type, **env} for row in accumulation])
    )
    write_csv(args.dtypes, pd.DataFrame([{**row, "device": device.type, **env} for row in dtypes]))
    for row in accumulation:
        print(f"{row['method']}: {row['result']:.6f} (error {row['abs_error']:.2e})")


if __name__ == "__main__":
    run_main(main)
