"""Does this checkout's code say the same of the real GPU runs as before a refactor? For a change that
must not alter what the report says (issue 41: templates and function splits), the committed GPU runs
(tests/fixtures/gpu-runs: qb, qe, ql) are drawn and rendered in-process, as tests/test_gpu_runs.py does,
with the comparisons qb vs qe and qb vs ql through `python -m lmstudy compare_runs`; the committed memory
snapshots (tests/fixtures/gpu/snapshot_*.pickle) are summarized too, since the report reads summaries
that the fixtures already hold and would not exercise the snapshot code.

    python tools/same_gpu_report.py OUT                 render into OUT (e.g. /tmp/before)
    python tools/same_gpu_report.py OUT --against BEFORE   render into OUT, then compare with BEFORE

Every report.md, index.html, CSV and JSON must be byte-identical; a PNG may differ only in its embedded
metadata (matplotlib's version), so two PNGs whose bytes differ are compared by their pixels.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's lmstudy, whatever the venv's editable install names

RUNS = REPO / "tests/fixtures/gpu-runs"
SNAPSHOTS = REPO / "tests/fixtures/gpu"
TEMPLATES = REPO / "workflow/templates"
STYLE = REPO / "workflow/report/figures.mplstyle"
SIZES = ["tiny", "small", "medium", "large", "xl", "2.7B"]  # the full study's sizes, as the test's
# config.yaml's compare: and noise: values, as the workflow passes them.
COMPARE_FLAGS = ["--min-effect", "0.03", "--gpu-min-effect", "0.015", "--gpu-agreement", "0.008",
                 "--compiled-agreement", "0.13",
                 "--min-gpu-busy", "0.85", "--max-spread", "0.05"]


def render_runs(out: Path) -> None:
    """Each run drawn (every section's figures) and rendered into out/report/<run>/, then the
    comparisons into out/report/compare/qb_vs_<b>/. From within `out`, as the workflow renders from its
    folder: the report names some files by path (the memory snapshots), and two renderings in two
    folders must name them alike."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.style.use(STYLE)
    from lmstudy.commands import compare_runs
    from lmstudy.report import render
    from lmstudy.report.labels import use_size_order
    from lmstudy.sections.contracts import contracts

    use_size_order(SIZES)
    os.chdir(out)
    for run in ("qb", "qe", "ql"):
        shutil.copytree(RUNS / run, Path("results") / run)
    for run in ("qb", "qe", "ql"):
        results = Path("results") / run
        for contract in contracts():
            contract.draw(results, results / "figures" / contract.name)
        tables = sorted(results.glob("*/*.csv"))
        render.render_study(results, run, contracts(), TEMPLATES, Path("report") / run, "GPU run", tables)
    for b in ("qe", "ql"):
        compare_runs.main(["--results", "results", "--a", "qb", "--b", b, "--templates", str(TEMPLATES),
                           "--out", f"report/compare/qb_vs_{b}", *COMPARE_FLAGS])


def summarize_snapshots(out: Path) -> None:
    """Each committed snapshot summarized into out/snapshots/<name>/, with its job's metadata beside it.
    By its path in the checkout, which the summary records: two checkouts' summaries record it alike."""
    from lmstudy.analyse.memory import summary

    os.chdir(REPO)
    for pickle in sorted(SNAPSHOTS.relative_to(REPO).glob("snapshot_*.pickle")):
        meta = summary.read_meta(summary.meta_path_for(pickle))
        summary.write(summary.summarize(pickle, meta), out / "snapshots" / pickle.stem)


def _same_pixels(a: Path, b: Path) -> bool:
    import matplotlib.image
    import numpy as np

    return np.array_equal(matplotlib.image.imread(a), matplotlib.image.imread(b))


def differences(before: Path, after: Path) -> list[str]:
    """What differs between two renderings: files on one side only, and files whose content differs
    (a PNG's bytes may differ where its pixels do not)."""
    names = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    names_after = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    found = [f"only before: {n}" for n in sorted(names - names_after)]
    found += [f"only after: {n}" for n in sorted(names_after - names)]
    for name in sorted(names & names_after):
        if filecmp.cmp(before / name, after / name, shallow=False):
            continue
        if name.suffix == ".png" and _same_pixels(before / name, after / name):
            continue
        found.append(f"differs: {name}")
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="an empty or absent folder to render into")
    p.add_argument("--against", type=Path, help="an earlier rendering to compare with")
    args = p.parse_args()
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    summarize_snapshots(out)
    render_runs(out)
    if args.against is None:
        return 0
    found = differences(args.against.resolve(), out)
    print("\n".join(found) if found else f"same: every file of {out} matches {args.against}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
