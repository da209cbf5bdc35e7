#!/usr/bin/env python
"""Time one model configuration for every pass and warm-up count (section 1).

Each pass runs in one fresh process forked from this one (torch imported,
CUDA untouched) that times every step; warm-up w's row is the window of
timed steps after its first w steps.

Example, by hand (the rest of the spec from config.yaml, as the workflow's jobs):
    python scripts/time_model.py --out small_ctx128.csv \
        --spec '{"size": "small", "context_length": 128, "precision": "bf16", "variant": "naive"}'
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
    p.add_argument("--out", type=Path, required=True, help="CSV of result rows")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    add_spec_arguments(p, "timing")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    fields = read_spec(args, "timing")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.timing import TimingSpec, run_job
    from lmstudy.phases import PhaseClock

    clock = PhaseClock()  # the imports are done: torch is loaded, CUDA untouched

    spec = from_fields(TimingSpec, fields)
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
