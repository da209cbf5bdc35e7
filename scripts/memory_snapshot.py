#!/usr/bin/env python
"""Record a CUDA memory snapshot of one step of one configuration (section 4).

Writes the snapshot (open it at https://pytorch.org/memory_viz) and, beside
it, a JSON of the configuration, torch.cuda.max_memory_allocated() over the
recorded step, the tensors' addresses and provenance. Out of memory is a
result (status OOM in the JSON), not a failure. Needs a CUDA GPU.

Example, by hand:
    python scripts/memory_snapshot.py --out snap.pickle --meta snap.json --size 2.7B \
        --d-model 2560 --d-ff 10240 --num-layers 32 --num-heads 32 \
        --context-length 512 --pass train_step --precision bf16
    python scripts/memory_summary.py snap.pickle --out snap_summary
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import add_model_arguments, model_kwargs, run_main  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the snapshot pickle to write")
    p.add_argument("--meta", type=Path, help="its metadata JSON (default: --out with .json)")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    add_model_arguments(p, recorded_in="metadata")
    p.add_argument("--pass", dest="pass_name", choices=["forward", "train_step"], required=True)
    p.add_argument("--warmup-steps", type=int, default=2, help="untimed steps before recording")
    p.add_argument("--max-entries", type=int, default=1_000_000, help="trace events kept")
    p.add_argument("--stacks", choices=["python", "all"], default="python",
                   help="frames recorded per allocation: all adds C++ (names the backward's autograd ops)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    from lmstudy.atomic import write_json
    from lmstudy.errors import UserError
    from lmstudy.measure.memory.capture import SnapshotSpec, capture
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()

    if args.warmup_steps < 1:
        raise UserError("--warmup-steps must be at least 1: recording starts after warm-up.")
    spec = SnapshotSpec(
        **model_kwargs(args),
        pass_name=args.pass_name,
        warmup_steps=args.warmup_steps,
        max_entries=args.max_entries,
        stacks=args.stacks,
    )
    meta = capture(spec, args.out, clock)
    if args.phases:
        clock.write(args.phases)
    write_json(args.meta or args.out.with_suffix(".json"), meta)
    print(
        f"{args.size} ctx {args.context_length} {args.pass_name} {args.precision}: "
        f"{meta['status']} ({meta['stage']}), max_memory_allocated "
        f"{meta['max_memory_allocated'] / 2**30:.3f} GiB -> {args.out}"
    )


if __name__ == "__main__":
    run_main(main)
