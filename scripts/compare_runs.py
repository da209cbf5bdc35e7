#!/usr/bin/env python
"""Compare two runs of the study side by side, with verdicts that respect noise.

    python scripts/compare_runs.py --results results --a h100 --b h200 \
        --templates workflow/templates --out report/compare/h100_vs_h200

Reads only results/<A>/ and results/<B>/; measures nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lmstudy.cli import run_main  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", type=Path, default=Path("results"), help="the folder that holds the runs")
    p.add_argument("--a", required=True, help="run A (the baseline): results/<A>/")
    p.add_argument("--b", required=True, help="run B: results/<B>/")
    p.add_argument("--templates", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--style", type=Path, help="a matplotlib style file for the figures")
    p.add_argument("--min-effect", type=float,
                   help="the smallest change a verdict calls faster or slower, e.g. 0.03: 3%% "
                        "(default: config.yaml's compare.min_effect)")
    args = p.parse_args(argv)
    if args.min_effect is None:
        from lmstudy.config import study_value

        args.min_effect = study_value("compare", "min_effect")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if args.style:
        plt.style.use(args.style)
    from lmstudy.report.compare import render_comparison

    render_comparison(args.results, args.a, args.b, args.templates, args.out, args.min_effect)
    print(f"wrote {args.out / 'index.html'} and {args.out / 'report.md'}")


if __name__ == "__main__":
    run_main(main)
