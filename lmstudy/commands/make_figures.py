"""Draw one report section's figures from its aggregated tables.

    python -m lmstudy make_figures --section timing --results results/default \
        --style workflow/report/figures.mplstyle --out results/default/figures/timing
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy make_figures"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--section", required=True, help="a section of lmstudy.registry.NAMES")
    p.add_argument("--results", type=Path, required=True, help="results/<run>")
    p.add_argument("--sizes", nargs="+", required=True, help="the sizes in the config's order")
    p.add_argument("--style", type=Path, help="a matplotlib style file")
    p.add_argument("--out", type=Path, required=True, help="folder for the PNG figures")
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if args.style:
        plt.style.use(args.style)
    from lmstudy.analyse.links import check_links_inside
    from lmstudy.report.labels import use_size_order
    from lmstudy.sections.contracts import contract

    check_links_inside(args.results)
    use_size_order(args.sizes)
    contract(args.section).draw(args.results, args.out)
    print("\n".join(str(p) for p in sorted(args.out.glob("*.png"))))
