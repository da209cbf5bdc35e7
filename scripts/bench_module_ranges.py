#!/usr/bin/env python
"""What section 2's module ranges cost a step, and that torch.compile leaves them out.

Each case runs in its own fresh process (lmstudy.measure.fresh_process),
the cases taking turns over the repeats: the model's forward and training
step timed with and without module ranges (lmstudy.measure.module_ranges, as
the nsys capture installs them), eager and under torch.compile. Each process
also counts the kernels of one more step: under torch.compile, a step with
ranges launches the same kernels as one without (the hooks return at once
while dynamo traces).

    python scripts/bench_module_ranges.py --out ranges.csv --size small --context-length 256 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from lmstudy.cli import compile_from_scratch, model_choice, run_main
from lmstudy.measure.fresh_process import mark_forking_parent

compile_from_scratch()
mark_forking_parent()
SIZES = {
    "small": dict(d_model=768, d_ff=3072, num_layers=12, num_heads=12),
    "tiny": dict(d_model=64, d_ff=256, num_layers=2, num_heads=4),
}


def one_case(spec: dict, ranges: bool, compiled: bool) -> dict:
    import contextlib

    import torch

    from lmstudy.measure.device_clock import now
    from lmstudy.measure.devices import resolve_device
    from lmstudy.measure.gpu_time import gpu_measures
    from lmstudy.measure.model import ModelConfig
    from lmstudy.measure.module_ranges import module_ranges
    from lmstudy.measure.steps import build_workload, make_step
    from lmstudy.model_choice import ModelChoice

    device = resolve_device(spec["device"], tf32=False)
    config = ModelConfig(vocab_size=10000, context_length=spec["context_length"], **SIZES[spec["size"]])
    work = build_workload(config, 4, spec["precision"], device, choice=ModelChoice.coerce(spec["model"]))
    if compiled:
        work.model = torch.compile(work.model)
    result = {}
    with module_ranges(work.model, 4) if ranges else contextlib.nullcontext() as marked:
        for pass_name in ("forward", "train_step"):
            step = make_step(work, pass_name)
            run = (lambda step=step: marked.step(step, device)) if ranges else step
            for _ in range(spec["warmup"]):
                run()
            times = []
            for _ in range(spec["steps"]):
                start = now(device)
                run()
                times.append((now(device) - start) * 1e3)
            result[f"{pass_name}_ms"] = statistics.median(times)
            result.update({f"{pass_name}_{k}": v for k, v in gpu_measures(run, device).items()})
    return result


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", default="small", choices=list(SIZES))
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    p.add_argument("--model", type=model_choice, default=None, metavar="JSON")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = p.parse_args(argv)
    import dataclasses

    import pandas as pd

    from lmstudy.atomic import write_csv
    from lmstudy.measure.fresh_process import run_forked
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.model_choice import ModelChoice

    import_lazy_modules()
    model = dataclasses.asdict(args.model or ModelChoice())
    spec = {"size": args.size, "context_length": args.context_length, "precision": args.precision,
            "model": model, "warmup": args.warmup, "steps": args.steps, "device": args.device}
    cases = [(ranges, compiled) for compiled in (False, True) for ranges in (False, True)]
    rows = []
    for repeat in range(args.repeats):
        for ranges, compiled in cases if repeat % 2 == 0 else list(reversed(cases)):
            result = run_forked(one_case, spec, ranges, compiled,
                                what=f"ranges={ranges} compiled={compiled}")
            rows.append({"repeat": repeat, "ranges": ranges, "compiled": compiled, **result})
            print(json.dumps(rows[-1]), flush=True)
    table = pd.DataFrame(rows)
    write_csv(args.out, table)
    columns = [c for c in table.columns if c.endswith(("_ms", "kernels_per_step"))]
    summary = table.groupby(["compiled", "ranges"])[columns].median()
    print(summary.round(3).to_string())
    for compiled in (False, True):
        on, off = summary.loc[(compiled, True)], summary.loc[(compiled, False)]
        print(f"compiled={compiled}: ranges cost " + ", ".join(
            f"{p} wall {on[f'{p}_ms'] / off[f'{p}_ms']:.3f}x, "
            f"GPU {on[f'{p}_gpu_busy_ms'] / off[f'{p}_gpu_busy_ms']:.3f}x, "
            f"kernels {on[f'{p}_kernels_per_step']:.0f} vs {off[f'{p}_kernels_per_step']:.0f}"
            if pd.notna(off.get(f"{p}_gpu_busy_ms")) else f"{p} wall {on[f'{p}_ms'] / off[f'{p}_ms']:.3f}x"
            for p in ("forward", "train_step")))


if __name__ == "__main__":
    run_main(main)
