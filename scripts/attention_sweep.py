#!/usr/bin/env python
"""Time one attention implementation at one head size over sequence lengths (section 5).

Batch x 1 head x seq x d inputs, causal; `steps` forwards and `steps`
backwards after `warmup` forward+backward steps, the memory in use before
the backward, and the SDPA backend used. Out-of-memory is a result row.

Example, by hand (the rest of the spec from config.yaml, as the workflow's jobs):
    python scripts/attention_sweep.py --out naive_fp32_d64.csv \
        --spec '{"implementation": "naive", "precision": "fp32", "head_dim": 64, "seq_lens": [256, 1024]}'
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lmstudy.cli import (  # noqa: E402
    add_spec_arguments,
    compile_from_scratch,
    fork_measuring_processes,
    read_spec,
    run_main,
)

compile_from_scratch()
fork_measuring_processes()

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="CSV of result rows, one per sequence length")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    add_spec_arguments(p, "attention")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    fields = read_spec(args, "attention")
    from lmstudy.errors import UserError

    if fields["steps"] < 2 or fields["warmup"] < 0 or min(fields["seq_lens"]) < 1 or fields["head_dim"] < 1:
        raise UserError(
            "the spec's steps must be at least 2, warmup at least 0, and sizes positive: fix the spec."
        )
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.attention import SweepSpec, run_sweep_in_processes
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.spec import from_fields
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()

    noise = NoisePolicy(**fields.pop("noise"))
    spec = from_fields(SweepSpec, fields)
    rows = run_sweep_in_processes(spec, noise, clock)
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
            f"{spec.implementation} {spec.precision} d={spec.head_dim} seq={row['seq_len']}: "
            f"{row['status']} {detail}"
        )


if __name__ == "__main__":
    run_main(main)
