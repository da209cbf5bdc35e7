#!/usr/bin/env python
"""Time the whole model eager and under torch.compile, per pass (section 6).

Eager first, then compiled, from the same initial weights; the compiled
model's first step (trace and compile) is recorded apart from its steady state.

Example, by hand (the rest of the spec from config.yaml, as the workflow's jobs):
    python scripts/compile_model.py --out small_bf16.csv \
        --spec '{"size": "small", "context_length": 512, "precision": "bf16", "attention": "naive"}'
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
    add_spec_arguments(p, "compile")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    fields = read_spec(args, "compile")
    from lmstudy.errors import UserError

    if fields["timed_steps"] < 2 or fields["warmup_steps"] < 0:
        raise UserError("the spec's timed_steps must be at least 2, warmup_steps at least 0: fix the spec.")
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.compile_bench import CompileSpec, run_job_in_processes
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()

    noise = NoisePolicy(**fields.pop("noise"))
    rows = run_job_in_processes(from_fields(CompileSpec, fields), noise, clock)
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
