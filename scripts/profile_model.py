#!/usr/bin/env python
"""The profiled program: warm-up outside the capture, then N profiled steps.

Run under Nsight Systems (it calls cudaProfilerStart/Stop around the
profiled steps, so warm-up stays out of a `--capture-range=cudaProfilerApi`
capture):

    nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \
        -o small_ctx256 python scripts/profile_model.py --size small --d-model 768 \
        --d-ff 3072 --num-layers 12 --num-heads 12 --context-length 256 --pass train_step

or under torch.profiler (--backend torch --trace trace.json.gz). A whole job,
nsys included, with its tables: scripts/profile_job.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import run_main  # noqa: E402


def add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", required=True, help="the size's name, recorded in the results")
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--d-ff", type=int, required=True)
    p.add_argument("--num-layers", type=int, required=True)
    p.add_argument("--num-heads", type=int, required=True)
    p.add_argument("--context-length", type=int, required=True)
    p.add_argument("--pass", dest="pass_name", choices=["forward", "train_step"], default="train_step")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--vocab-size", type=int, default=10000)
    p.add_argument("--warmup-steps", type=int, default=2, help="steps before the capture")
    p.add_argument("--profiled-steps", type=int, default=2, help="steps inside the capture")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tf32", action="store_true", help="allow TF32 in fp32 matrix products")
    p.add_argument("--memory-cap-gb", type=float, default=None)
    p.add_argument("--backend", choices=["nsys", "torch"], default="nsys")


def spec_from_args(args):
    from lmstudy.nsys.capture import ProfileSpec

    return ProfileSpec(
        size=args.size,
        d_model=args.d_model,
        d_ff=args.d_ff,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        context_length=args.context_length,
        pass_name=args.pass_name,
        precision=args.precision,
        batch_size=args.batch_size,
        vocab_size=args.vocab_size,
        warmup_steps=args.warmup_steps,
        profiled_steps=args.profiled_steps,
        device=args.device,
        tf32=args.tf32,
        backend=args.backend,
        memory_cap_gb=args.memory_cap_gb,
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_workload_args(p)
    p.add_argument("--trace", type=Path, help="torch backend: where to write the Chrome trace")
    p.add_argument("--record", type=Path, help="JSON record of the run (status, environment)")
    args = p.parse_args(argv)
    from lmstudy.atomic import write_json
    from lmstudy.devices import UserError
    from lmstudy.nsys.capture import run_profile

    if args.backend == "torch" and args.trace is None:
        raise UserError("the torch backend writes a trace: pass --trace PATH (e.g. trace.json.gz).")
    record = run_profile(spec_from_args(args), trace=args.trace)
    if args.record:
        write_json(args.record, record)
    print(record["status"], record.get("error", ""), "steps (ms):", record["captured_step_ms"])


if __name__ == "__main__":
    run_main(main)
