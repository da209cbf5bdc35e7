#!/usr/bin/env python
"""Time one rung of the training-step ladder for one size (section 7), then the GPU's matmul ceiling.

The workflow runs one such job per size and rung (a fresh process each).
After the rung, the same process measures the dense bf16 matmul ceiling of
the same GPU (lmstudy.measure.matmul_ceiling: bursts of back-to-back products
at steady clocks, the clock sampled during them) into --matmul-out;
scripts/ladder_table.py joins each rung with its own GPU's ceiling. A rung this device cannot run (CUDA
graphs on a CPU, ...) is a row with status "unsupported" and the reason.
scripts/bench_ladder.py runs the same code for every rung at once, by hand.

Example, by hand (the rest of the spec from config.yaml, as the workflow's jobs):
    python scripts/ladder_rung.py --out small_bf16-sdpa.csv --matmul-out small_bf16-sdpa.matmul.csv \
        --spec '{"size": "small", "context_length": 1024, "rung": "bf16-sdpa"}'
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
    p.add_argument("--out", type=Path, required=True, help="CSV of the rung's row")
    p.add_argument("--matmul-out", type=Path, required=True, help="CSV of the matmul ceiling's bursts")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    add_spec_arguments(p, "ladder")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    fields = read_spec(args, "ladder")
    from lmstudy.errors import UserError
    from lmstudy.ladder_rungs import RUNGS

    if fields["rung"] not in RUNGS:
        raise UserError(f"the spec's rung {fields['rung']!r} is none of the ladder's: {', '.join(RUNGS)}.")
    if fields["timed_steps"] < 2 or fields["warmup_steps"] < 0 or fields["profile_steps"] < 0:
        raise UserError(
            "the spec's timed_steps must be at least 2, warmup_steps and profile_steps at least 0: "
            "fix the spec."
        )
    matmul = fields.pop("matmul")
    if min(*matmul["sizes"], matmul["bursts"], matmul["burst_products"]) < 1 or matmul["warmup_s"] < 0:
        raise UserError(
            "the spec's matmul sizes, bursts and burst_products must be at least 1, "
            "warmup_s at least 0: fix the spec."
        )
    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.ladder_bench import BenchSpec, CeilingSpec, measure_rung_and_ceiling
    from lmstudy.measure.matmul_ceiling import summarize
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()

    policy = NoisePolicy(**fields.pop("noise"))
    spec = from_fields(BenchSpec, fields)
    ceiling = from_fields(CeilingSpec, matmul)
    row, bursts = measure_rung_and_ceiling(spec, ceiling, policy, clock)
    if args.phases:
        clock.write(args.phases)
    write_csv(args.matmul_out, pd.DataFrame(bursts))
    write_csv(args.out, pd.DataFrame([row]))
    detail = (
        f"median {row['median_ms']:.3f} ms, "
        + (f"{row['achieved_tflops']:.3g} TFLOP/s" if row.get("achieved_tflops") else "FLOPs not counted")
        if row["status"] == "ok" else row.get("reason") or row.get("error", "")
    )
    print(f"{spec.size} {row['rung']}: {row['status']} {detail}")
    best = summarize(bursts)
    print(f"matmul ceiling {best['ceiling_tflops']:.4g} TFLOP/s at n={best['n']} "
          f"(median burst {best['median_tflops']:.4g})")


if __name__ == "__main__":
    run_main(main)
