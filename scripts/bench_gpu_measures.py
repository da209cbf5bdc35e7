#!/usr/bin/env python
"""The GPU measures of one step two ways: what each gives and what each costs a fresh process.

Every measuring process profiles one more step for the GPU's busy time and the kernels it
launches (lmstudy.measure.gpu_time). Two ways to read them:

- trace: torch.profiler with CPU and CUDA activity, its Chrome trace written, parsed back and
  summed (kernel_breakdown, the way before);
- events: torch.profiler with CUDA activity only, its events summed in memory (gpu_measures).

Each fresh process (forked, as the measuring ones are) builds the model, runs warm-up steps,
then profiles with one way first and the other second, turn about: the first call's seconds are
what a measuring process pays; both calls' measures must agree (busy time within the step's own
variation, kernels equal).

    python scripts/bench_gpu_measures.py --out measures.csv --sizes small 2.7B --repeats 3
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lmstudy.cli import run_main
from lmstudy.measure.fresh_process import mark_forking_parent

WAYS = ("trace", "events")


def one_process(fields: dict, pass_name: str, first: str) -> dict:
    from lmstudy.measure.device_clock import synchronize
    from lmstudy.measure.devices import open_device
    from lmstudy.measure.gpu_time import gpu_measures, kernel_breakdown
    from lmstudy.measure.spec import ModelSpec, from_fields
    from lmstudy.measure.steps import make_step

    spec = from_fields(ModelSpec, fields)
    device, _ = open_device(spec.device, spec.tf32, spec.memory_cap_gb)
    step = make_step(spec.build_workload(device), pass_name)
    for _ in range(3):
        step()
    synchronize(device)

    def trace():
        breakdown = kernel_breakdown(step, device, 1)
        return {"gpu_busy_ms": breakdown["gpu_busy_ms"], "kernels_per_step": breakdown["kernels_per_step"]}

    ways = {"trace": trace, "events": lambda: gpu_measures(step, device)}
    row = {"first": first}
    for way in (first, *[w for w in WAYS if w != first]):
        started = time.perf_counter()
        measures = ways[way]()
        row[f"{way}_s"] = time.perf_counter() - started
        row[f"{way}_gpu_busy_ms"] = measures["gpu_busy_ms"]
        row[f"{way}_kernels"] = measures["kernels_per_step"]
    return row


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--sizes", nargs="+", default=["small", "2.7B"])
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--passes", nargs="+", default=["forward", "train_step"])
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--configfile", type=Path, default=Path("config.yaml"))
    p.add_argument("--preset", default=None, help="the config's preset (default: its own)")
    args = p.parse_args(argv)
    mark_forking_parent()
    import pandas as pd
    import yaml

    from lmstudy import config as study_config
    from lmstudy.atomic import write_csv
    from lmstudy.job_spec import model_fields
    from lmstudy.measure.fresh_process import run_forked

    raw = yaml.safe_load(args.configfile.read_text())
    raw["preset"] = args.preset or raw["preset"]
    config = study_config.load(raw, "workflow/schemas/config.schema.yaml")
    rows = []
    for size in args.sizes:
        for precision in args.precisions:
            fields = model_fields(config, size, args.context_length, precision)
            for pass_name in args.passes:
                for repeat in range(args.repeats):
                    for first in WAYS if repeat % 2 == 0 else WAYS[::-1]:
                        row = run_forked(one_process, fields, pass_name, first, what=f"{size} {pass_name}")
                        row.update(size=size, precision=precision, pass_name=pass_name, repeat=repeat)
                        rows.append(row)
                        print(row, flush=True)
    table = pd.DataFrame(rows)
    write_csv(args.out, table)
    table["busy_ratio"] = table["events_gpu_busy_ms"] / table["trace_gpu_busy_ms"]
    table["kernels_equal"] = table["events_kernels"] == table["trace_kernels"]
    table["first_s"] = [r[f"{r['first']}_s"] for _, r in table.iterrows()]
    summary = table.groupby(["size", "precision", "pass_name", "first"]).agg(
        first_call_s=("first_s", "median"), busy_ratio_min=("busy_ratio", "min"),
        busy_ratio_max=("busy_ratio", "max"), kernels_equal=("kernels_equal", "all"),
        trace_busy_ms=("trace_gpu_busy_ms", "median"), kernels=("trace_kernels", "median"))
    print(summary.to_string())


if __name__ == "__main__":
    run_main(main)
