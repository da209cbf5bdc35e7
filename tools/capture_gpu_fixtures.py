"""Capture the small real-GPU files the CPU tests read (run on a CUDA node).

    nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi \
        --capture-range-end=stop -o OUT/nsys_<pass> \
        python tools/capture_gpu_fixtures.py nsys --pass train_step
    python tools/capture_gpu_fixtures.py snapshot --out OUT

The model is deliberately tiny (2 layers, d_model 256, context 128, batch 2)
so that the exports stay small enough to commit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from lmstudy.measure.device_clock import synchronize
from lmstudy.measure.model import ModelConfig
from lmstudy.measure.steps import build_workload, make_step

TINY = ModelConfig(vocab_size=1000, context_length=128, d_model=256, d_ff=1024, num_layers=2, num_heads=4)


def nsys_capture(pass_name: str, precision: str, steps: int, attention: str) -> None:
    device = torch.device("cuda")
    config = dataclasses.replace(TINY, attention=attention)
    work = build_workload(config, batch_size=2, precision=precision, device=device)
    step = make_step(work, pass_name)
    for _ in range(2):
        step()
    synchronize(device)
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(steps):
        step()
        synchronize(device)
    torch.cuda.cudart().cudaProfilerStop()


def snapshots(out: Path) -> None:
    device = torch.device("cuda")
    out.mkdir(parents=True, exist_ok=True)
    records = {}
    for precision in ("fp32", "bf16"):
        for pass_name in ("forward", "train_step"):
            work = build_workload(TINY, batch_size=2, precision=precision, device=device)
            step = make_step(work, pass_name)
            step()
            synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
            step()
            synchronize(device)
            name = f"snapshot_{pass_name}_{precision}.pickle"
            torch.cuda.memory._dump_snapshot(str(out / name))
            torch.cuda.memory._record_memory_history(enabled=None)
            records[name] = {
                "max_memory_allocated": torch.cuda.max_memory_allocated(device),
                "memory_allocated_after": torch.cuda.memory_allocated(device),
                "model": TINY.__dict__,
                "batch_size": 2,
                "precision": precision,
                "pass": pass_name,
                "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name(device),
            }
            del work, step
            torch.cuda.empty_cache()
    (out / "snapshots.json").write_text(json.dumps(records, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("nsys")
    p.add_argument("--pass", dest="pass_name", default="train_step")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--attention", default="naive")
    s = sub.add_parser("snapshot")
    s.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.what == "nsys":
        nsys_capture(args.pass_name, args.precision, args.steps, args.attention)
    else:
        snapshots(args.out)


if __name__ == "__main__":
    main()
