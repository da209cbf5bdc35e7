"""Summarize a CUDA memory snapshot (section 4); runs anywhere, no GPU needed.

Writes into DIR:
  summary.json             peak_bytes (allocated memory at its peak, counting
                           blocks allocated before recording began), where it
                           happened, memory by kind at the peak, phases, the
                           largest allocations, and the allocator's own
                           max_memory_allocated when the job's JSON is there
  timeline.csv             allocated bytes after every alloc/free, with its phase
  largest_allocations.csv  the largest allocations and the user-code lines that made them
  kinds.csv                bytes by kind (parameters, gradients, ...) at the peak

    python -m lmstudy memory_summary SNAPSHOT.pickle --out DIR

The metadata JSON that lmstudy measure memory writes beside the snapshot
(SNAPSHOT.json) is read when present, or named with --meta.
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy memory_summary"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("snapshot", type=Path, help="a torch.cuda.memory._dump_snapshot pickle")
    p.add_argument("--out", type=Path, required=True, help="directory for the summary files")
    p.add_argument("--meta", type=Path, help="the snapshot job's JSON (default: SNAPSHOT.json)")
    p.add_argument(
        "--top",
        type=int,
        required=True,
        help="how many largest allocations to list (config memory.top_allocations)",
    )
    args = p.parse_args(argv)
    from lmstudy.analyse.memory import summary

    meta = summary.read_meta(args.meta or summary.meta_path_for(args.snapshot), named=args.meta is not None)
    result = summary.summarize(args.snapshot, meta, top=args.top)
    summary.write(result, args.out)
    s = result["summary"]
    line = f"peak {s['peak_bytes'] / 2**20:.1f} MiB in {s['peak_phase']}"
    if s["max_memory_allocated"]:
        line += (
            f"; max_memory_allocated {s['max_memory_allocated'] / 2**20:.1f} MiB"
            f" ({100 * s['peak_vs_allocator']:+.3f}%)"
        )
    print(f"{line} -> {args.out}")
