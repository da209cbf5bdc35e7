#!/usr/bin/env python
"""Compare two runs of the study side by side, with verdicts that respect noise.

    python scripts/compare_runs.py --results results --a h100 --b h200 \
        --templates workflow/templates --out report/compare/h100_vs_h200

Reads only results/<A>/ and results/<B>/; measures nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmstudy.cli import run_main


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
                        "of wall time (default: config.yaml's compare.min_effect)")
    p.add_argument("--gpu-min-effect", type=float,
                   help="the smallest change of GPU busy time a verdict calls faster or slower, e.g. 0.015 "
                        "(default: config.yaml's compare.gpu_min_effect)")
    p.add_argument("--gpu-agreement", type=float,
                   help="how closely two processes' GPU busy times of the same work agree, e.g. 0.008 "
                        "(default: config.yaml's compare.gpu_agreement)")
    p.add_argument("--min-gpu-busy", type=float,
                   help="a side is host-bound below this GPU busy share (default: config.yaml's noise)")
    p.add_argument("--max-spread", type=float,
                   help="a side is noisy when its processes' medians spread by more (default: config.yaml's)")
    args = p.parse_args(argv)
    from lmstudy.analyse.compare.verdict import Noise, noise_of_study
    from lmstudy.config import study_value

    if args.min_effect is None:
        args.min_effect = study_value("compare", "min_effect")
    study = noise_of_study()
    noise = Noise(
        study.min_gpu_busy if args.min_gpu_busy is None else args.min_gpu_busy,
        study.max_spread if args.max_spread is None else args.max_spread,
        study.gpu_agreement if args.gpu_agreement is None else args.gpu_agreement,
        study.gpu_min_effect if args.gpu_min_effect is None else args.gpu_min_effect,
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if args.style:
        plt.style.use(args.style)
    from lmstudy.report.compare import render_comparison
    from lmstudy.sections.contracts import contracts

    render_comparison(
        contracts(), args.results, args.a, args.b, args.templates, args.out, args.min_effect, noise
    )
    print(f"wrote {args.out / 'index.html'} and {args.out / 'report.md'}")


if __name__ == "__main__":
    run_main(main)
