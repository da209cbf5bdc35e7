#!/usr/bin/env python
"""Verdict counts per measure of a rendered comparison: what a closing note reports (issue 30).

    python tools/verdict_counts.py report/compare/qa_vs_qb [more comparison folders]

For each table of the comparison that carries verdicts (timing, attention,
torch.compile, the ladder), one line per measure: wall time, GPU time and
kernels per step, each verdict counted over the rows both runs measured.
Reads the tables' CSVs only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

# The tables' verdict columns (lmstudy/report/compare_cells.py) and the measure each judges.
MEASURES = {"wall verdict": "wall time", "GPU verdict": "GPU time", "kernels": "kernels per step"}
COMPARED = {"faster", "slower", "same", "undecided", "one process", "equal", "differs"}


def counts(folder: Path) -> list[str]:
    lines = []
    for csv in sorted((folder / "tables").glob("*.csv")):
        table = pd.read_csv(csv)
        for column, measure in MEASURES.items():
            if column not in table:
                continue
            verdicts = table[column][table[column].isin(COMPARED)]
            if verdicts.empty:
                continue
            said = ", ".join(f"{n} {v}" for v, n in verdicts.value_counts().items())
            claims = verdicts.isin(["faster", "slower"]).sum()
            lines.append(f"{csv.stem}: {measure}: {said} ({claims} of {len(verdicts)} faster or slower)")
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", type=Path, nargs="+", help="report/compare/<A>_vs_<B> folders")
    args = p.parse_args(argv)
    for folder in args.folders:
        if not (folder / "tables").is_dir():
            p.error(f"{folder}/tables/ does not exist: name a rendered comparison's folder")
        print(f"== {folder}")
        print("\n".join(counts(folder)) or "no table with verdicts")


if __name__ == "__main__":
    main()
