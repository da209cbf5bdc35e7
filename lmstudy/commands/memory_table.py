"""Gather the memory snapshots' summaries into the section's table (section 4).

One row per configured size x context length x pass x precision; a
configuration with no summary (snapshots need a GPU) is a `skipped` row
carrying --skipped-reason.

    python -m lmstudy memory_table --out results/default/memory/memory.csv \
        --sizes 2.7B --context-lengths 128 256 512 \
        --passes forward train_step --precisions fp32 bf16 \
        --summaries results/default/memory/summary/*/summary.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy memory_table"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--results", type=Path, help="results/<run>, paths are kept relative to it (default: OUT/../..)"
    )
    p.add_argument("--sizes", nargs="+", required=True)
    p.add_argument("--context-lengths", type=int, nargs="+", required=True)
    p.add_argument("--passes", nargs="+", required=True)
    p.add_argument("--precisions", nargs="+", required=True)
    p.add_argument("--summaries", type=Path, nargs="*", default=[])
    p.add_argument("--skipped-reason", default="", help="why configurations have no summary")
    args = p.parse_args(argv)
    from lmstudy.analyse.memory import table
    from lmstudy.atomic import write_csv

    frame = table.build(
        args.sizes,
        args.context_lengths,
        args.passes,
        args.precisions,
        args.summaries,
        args.results or args.out.parent.parent,
        args.skipped_reason,
    )
    write_csv(args.out, frame)
    print(frame["status"].value_counts().to_string())
