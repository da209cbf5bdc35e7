#!/usr/bin/env python
"""The profiled program: every pass's warm-up outside the capture, then N profiled steps of each.

Run under Nsight Systems (it calls cudaProfilerStart/Stop around the
profiled steps, so warm-up stays out of a `--capture-range=cudaProfilerApi`
capture; each pass's steps run inside an NVTX range "profiled pass <pass>"):

    nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
        -o small_ctx256 python scripts/profile_model.py --size small --d-model 768 \
        --d-ff 3072 --num-layers 12 --num-heads 12 --context-length 256 --passes forward train_step

or under torch.profiler (--backend torch --trace trace.json.gz). A whole job,
nsys included, with its tables: lmstudy measure nsys.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmstudy.cli import add_model_arguments, model_kwargs, run_main


def add_workload_args(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, recorded_in="results", precision_default="fp32")
    p.add_argument(
        "--passes",
        nargs="+",
        choices=["forward", "train_step"],
        default=["forward", "train_step"],
        help="the passes to profile, in this order, in one process and one capture",
    )
    p.add_argument("--warmup-steps", type=int, default=2, help="steps of each pass before the capture")
    p.add_argument("--profiled-steps", type=int, default=2, help="steps of each pass inside the capture")
    p.add_argument("--backend", choices=["nsys", "torch"], default="nsys")


def spec_from_args(args):
    from lmstudy.measure.nsys.capture import ProfileSpec

    return ProfileSpec(
        **model_kwargs(args),
        passes=tuple(args.passes),
        warmup_steps=args.warmup_steps,
        profiled_steps=args.profiled_steps,
        backend=args.backend,
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_args(p)
    p.add_argument("--trace", type=Path, help="torch backend: where to write the Chrome trace")
    p.add_argument("--record", type=Path, help="JSON record of the run: per pass, status and environment")
    args = p.parse_args(argv)
    from lmstudy.atomic import write_json
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.capture import run_profile
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()
    if args.backend == "torch" and args.trace is None:
        raise UserError("the torch backend writes a trace: pass --trace PATH (e.g. trace.json.gz).")
    records = run_profile(spec_from_args(args), trace=args.trace, clock=clock)
    if args.record:
        # The launcher (lmstudy.measure.nsys.job) adds the phases to the job's.
        write_json(args.record, {"passes": records, "phases": dict(clock.seconds)})
    for name, record in records.items():
        print(name, record["status"], record["error"], "steps (ms):", record["captured_step_ms"])


if __name__ == "__main__":
    run_main(main)
