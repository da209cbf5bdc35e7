"""Turn one profile into the tidy kernel table (section 2).

    python -m lmstudy nsys_kernels REPORT --out kernels.csv [--ranges ranges.csv]

REPORT is an Nsight Systems report (.nsys-rep, exported to .sqlite beside it
with `nsys export`), its .sqlite export, or a torch.profiler Chrome trace
(.json or .json.gz). One row per (innermost enclosing range, kernel):
range, path, phase, kernel, kind, category, instances, total_ns,
adopted_instances, adopted_ns, min_ns, max_ns. A kernel belongs to the range
around the CUDA call that launched it; kernels that autograd's thread
launches, outside every range of that thread, are adopted by the range open
on the main thread at that moment (`backward`), and counted in adopted_*.
A profile of section 2's program holds each pass in a range "profiled pass
<pass>": the table then has a `pass` column, each pass's rows from its own
part of the capture.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROG = "python -m lmstudy nsys_kernels"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("report", type=Path, help=".nsys-rep, .sqlite or torch trace .json(.gz)")
    p.add_argument("--out", type=Path, required=True, help="the kernel table (CSV)")
    p.add_argument("--ranges", type=Path, help="also write the per-range table (CSV)")
    p.add_argument("--nsys", default="nsys", help="nsys program, to export an .nsys-rep")
    p.add_argument(
        "--domain",
        help="NVTX domain of the program's ranges, read exactly (default: lmstudy's own, "
        "or every domain when the profile has none of lmstudy's ranges)",
    )
    p.add_argument("--all-domains", action="store_true", help="read ranges of every NVTX domain")
    args = p.parse_args(argv)
    import pandas as pd

    from lmstudy.analyse.nsys.events import kernel_table, range_table, split_by_pass
    from lmstudy.analyse.nsys.report_file import read_profile
    from lmstudy.atomic import write_csv
    from lmstudy.ranges import NVTX_DOMAIN

    domain = None if args.all_domains else (args.domain or NVTX_DOMAIN)
    events = read_profile(args.report, args.nsys, domain, exact=args.domain is not None)
    if events.note:
        print(f"note: {args.report}: {events.note}.", file=sys.stderr)
    passes = split_by_pass(events)
    if passes:

        def per_pass(make):
            return pd.concat([make(part).assign(**{"pass": name}) for name, part in passes.items()])

        table, ranges = per_pass(kernel_table), per_pass(range_table)
    else:
        table, ranges = kernel_table(events), range_table(events)
    write_csv(args.out, table)
    if args.ranges:
        write_csv(args.ranges, ranges)
    print(
        (f"passes {', '.join(passes)}: " if passes else "")
        + f"{len(table)} rows, {int(table['instances'].sum())} GPU activities, "
        f"{table['total_ns'].sum() / 1e6:.3f} ms -> {args.out}"
    )
