"""Render the report (index.html and report.md) from the aggregated tables.

    python -m lmstudy render_report --results results/default --run default \
        --sections timing --templates workflow/templates --out report
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PROG = "python -m lmstudy render_report"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--results", type=Path, required=True, help="results/<run>")
    p.add_argument("--sizes", nargs="+", required=True, help="the sizes in the config's order")
    p.add_argument("--run", required=True)
    p.add_argument("--sections", nargs="+", required=True)
    p.add_argument(
        "--environment-tables",
        type=Path,
        nargs="*",
        default=[],
        help="the aggregated tables whose provenance columns the header shows",
    )
    p.add_argument("--templates", type=Path, required=True)
    p.add_argument("--title", required=True, help="the report's title (config report.title)")
    p.add_argument(
        "--full-study",
        type=json.loads,
        required=True,
        metavar="JSON",
        help="the full study's grids by section (lmstudy.config.full_study()): what the "
        "report says this run left out",
    )
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    from lmstudy.report import coverage, render
    from lmstudy.report.labels import use_size_order
    from lmstudy.sections.contracts import contracts

    use_size_order(args.sizes)
    coverage.use_full_study(args.full_study)
    render.render_study(
        args.results,
        args.run,
        contracts(args.sections),
        args.templates,
        args.out,
        args.title,
        args.environment_tables,
    )
    print(f"wrote {args.out / 'index.html'} and {args.out / 'report.md'}")
