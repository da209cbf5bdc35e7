#!/usr/bin/env python
"""Record a CUDA memory snapshot of one step of one configuration (section 4).

Writes the snapshot (open it at https://pytorch.org/memory_viz) and, beside
it, a JSON of the configuration, torch.cuda.max_memory_allocated() over the
recorded step, the tensors' addresses and provenance. Out of memory is a
result (status OOM in the JSON), not a failure. Needs a CUDA GPU.

Example, by hand (the rest of the spec from config.yaml, as the workflow's jobs):
    python scripts/memory_snapshot.py --out snap.pickle --meta snap.json \
        --spec '{"size": "2.7B", "context_length": 512, "pass_name": "train_step", "precision": "bf16"}'
    python scripts/memory_summary.py snap.pickle --out snap_summary
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import add_spec_arguments, read_spec, run_main  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the snapshot pickle to write")
    p.add_argument("--meta", type=Path, help="its metadata JSON (default: --out with .json)")
    p.add_argument("--phases", type=Path, help="JSON record of where the job's time went (optional)")
    add_spec_arguments(p, "memory")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    fields = read_spec(args, "memory")
    from lmstudy.atomic import write_json
    from lmstudy.errors import UserError
    from lmstudy.measure.memory.capture import SnapshotSpec, capture
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.steps import import_lazy_modules
    from lmstudy.phases import PhaseClock

    import_lazy_modules()  # an import, counted as one, not in the build
    clock = PhaseClock()

    spec = from_fields(SnapshotSpec, fields)
    if spec.warmup_steps < 1:
        raise UserError("the spec's warmup_steps must be at least 1: recording starts after warm-up.")
    meta = capture(spec, args.out, clock)
    if args.phases:
        clock.write(args.phases)
    write_json(args.meta or args.out.with_suffix(".json"), meta)
    print(
        f"{spec.size} ctx {spec.context_length} {spec.pass_name} {spec.precision}: "
        f"{meta['status']} ({meta['stage']}), max_memory_allocated "
        f"{meta['max_memory_allocated'] / 2**30:.3f} GiB -> {args.out}"
    )


if __name__ == "__main__":
    run_main(main)
