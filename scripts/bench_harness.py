#!/usr/bin/env python
"""Benchmark the timing harness against a bare loop timed by CUDA events.

Both time the same training step of the same model in the same process,
in alternating rounds so that clock and thermal drift hit both alike:
- harness: lmstudy.measure.timing.time_steps (host clock, device synchronized after
  every step), as the timing section measures;
- bare, synchronized: a loop with a CUDA event pair around each step and a
  device synchronization after each, the same semantics as the harness: the
  difference is the harness's own cost (target: within 1%);
- bare, pipelined: the same loop with one synchronization at the end, so the
  host queues step i+1 while the GPU runs step i: the difference is what
  synchronizing after every step costs a launch-bound model.

    python scripts/bench_harness.py --size-dims 768 3072 12 12 --context-length 512
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from lmstudy.cli import run_main


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-dims", type=int, nargs=4, default=[768, 3072, 12, 12],
                   metavar=("D_MODEL", "D_FF", "LAYERS", "HEADS"))
    p.add_argument("--context-length", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--pass", dest="pass_name", default="train_step")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", type=Path, help="also write the numbers as JSON here")
    args = p.parse_args(argv)

    import torch

    from lmstudy import environment
    from lmstudy.measure.devices import resolve_device
    from lmstudy.measure.model import ModelConfig
    from lmstudy.measure.steps import build_workload, make_step
    from lmstudy.measure.timing import time_steps

    device = resolve_device("cuda")
    d_model, d_ff, layers, heads = args.size_dims
    config = ModelConfig(10000, args.context_length, d_model, d_ff, layers, heads)
    work = build_workload(config, args.batch_size, args.precision, device)
    step = make_step(work, args.pass_name)
    for _ in range(5):
        step()
    torch.cuda.synchronize()

    def bare_loop(steps: int, sync_each: bool) -> list[float]:
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(steps)]
        step()
        torch.cuda.synchronize()
        for start, end in pairs:
            start.record()
            step()
            end.record()
            if sync_each:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in pairs]

    harness, synced, pipelined = [], [], []
    for _ in range(args.rounds):
        harness += [t * 1e3 for t in time_steps(step, device, warmup=1, steps=args.steps)]
        synced += bare_loop(args.steps, sync_each=True)
        pipelined += bare_loop(args.steps, sync_each=False)
    h, b, q = (statistics.median(x) for x in (harness, synced, pipelined))
    result = {
        "config": vars(args) | {"out": str(args.out)},
        "harness_median_ms": h,
        "bare_synced_events_median_ms": b,
        "bare_pipelined_events_median_ms": q,
        "harness_vs_synced": (h - b) / b,
        "harness_vs_pipelined": (h - q) / q,
        "spread_ms": {name: [min(x), max(x)] for name, x in
                      (("harness", harness), ("synced", synced), ("pipelined", pipelined))},
        "environment": environment.describe(device),
    }
    print(json.dumps(result, indent=2, default=str))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    run_main(main)
