"""Compare two runs of the study side by side, with verdicts that respect noise.

    python -m lmstudy compare_runs --results results --a h100 --b h200 \
        --templates workflow/templates --out report/compare/h100_vs_h200

Reads only results/<A>/ and results/<B>/; measures nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROG = "python -m lmstudy compare_runs"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--results", type=Path, default=Path("results"), help="the folder that holds the runs")
    p.add_argument("--a", required=True, help="run A (the baseline): results/<A>/")
    p.add_argument("--b", required=True, help="run B: results/<B>/")
    p.add_argument("--templates", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--style", type=Path, help="a matplotlib style file for the figures")
    p.add_argument(
        "--min-effect",
        type=float,
        required=True,
        help="the smallest change of wall time a verdict calls faster or slower, e.g. 0.03: 3%% "
        "(config compare.min_effect)",
    )
    p.add_argument(
        "--gpu-min-effect",
        type=float,
        required=True,
        help="the smallest change of GPU busy time a verdict calls faster or slower, e.g. 0.015 "
        "(config compare.gpu_min_effect)",
    )
    p.add_argument(
        "--gpu-agreement",
        type=float,
        required=True,
        help="how closely two processes' GPU busy times of the same work agree, e.g. 0.008 "
        "(config compare.gpu_agreement)",
    )
    p.add_argument(
        "--compiled-agreement",
        type=float,
        required=True,
        help="how closely two compilations of one model agree, e.g. 0.13: a row measured under "
        "torch.compile gets intervals at least that wide (config compare.compiled_agreement)",
    )
    p.add_argument(
        "--min-gpu-busy",
        type=float,
        required=True,
        help="a side is host-bound below this GPU busy share (config noise.min_gpu_busy)",
    )
    p.add_argument(
        "--max-spread",
        type=float,
        required=True,
        help="a side is noisy where its processes' medians spread more (config noise.max_spread)",
    )
    return p


def main(argv=None) -> None:
    args = _parser().parse_args(argv)
    from lmstudy.analyse.compare.verdict import Noise

    noise = Noise(args.min_gpu_busy, args.max_spread, args.gpu_agreement, args.gpu_min_effect,
                  args.compiled_agreement)
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
