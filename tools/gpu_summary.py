#!/usr/bin/env python
"""What a closing note reports of GPU runs, from their own records (issues 37 and 39).

    python tools/gpu_summary.py RUN_FOLDER [RUN_FOLDER ...]     each a copy holding results/<run>/

For each run: its jobs and job-seconds (all, and the measuring jobs' as GPU-minutes), the span from
the first GPU job's start to the last one's end, job-seconds by rule and phase, seconds per GPU; for
a run with a 2.7B ladder, its best rung's share of the sustained matmul ceiling; and the report's
summary where it was rendered. Reads CSVs and the report's Markdown only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def summary(folder: Path) -> None:
    # The copy's own run (results/<its folder's name>), where other runs were copied in beside it to compare.
    own = folder / "results" / folder.name
    run = folder.name if (own / "cost" / "jobs.csv").exists() else next(
        p.name for p in (folder / "results").iterdir() if (p / "cost" / "jobs.csv").exists())
    jobs = pd.read_csv(folder / "results" / run / "cost" / "jobs.csv")
    gpu = jobs[jobs["measuring"].astype(str) == "True"]
    print(f"== {run}: {len(jobs)} jobs, {jobs['wall_s'].sum():.0f} job-s; measuring {len(gpu)} jobs, "
          f"{gpu['wall_s'].sum():.0f} job-s = {gpu['wall_s'].sum() / 60:.1f} GPU-min")
    if len(gpu) and gpu["started_at"].notna().any():
        span = gpu["ended_at"].max() - gpu["started_at"].min()
        print(f"   first GPU job start to last GPU job end: {span:.0f} s")
    phases = [c for c in jobs.columns if c.endswith("_s") and c not in ("wall_s", "waited_s")
              and not c.endswith("repeat_s")]
    table = jobs.groupby("rule")[["wall_s", *phases]].sum().round(1)
    table.insert(0, "jobs", jobs.groupby("rule").size())
    print(table.sort_values("wall_s", ascending=False).to_string())
    if "gpu_index" in gpu and gpu["gpu_index"].notna().any():
        print("   seconds per GPU:", gpu.groupby("gpu_index")["wall_s"].sum().round(0).to_dict())
    ladder = folder / "results" / run / "ladder" / "ladder.csv"
    if ladder.exists():
        rows = pd.read_csv(ladder)
        share = rows.get("share_of_matmul", pd.Series(float("nan"), index=rows.index))
        big = rows[(rows["size"].astype(str) == "2.7B") & share.notna()]
        if len(big):
            best = big.loc[big["share_of_matmul"].idxmax()]
            print(f"   2.7B ladder: best rung {best['rung']}: {best['share_of_matmul']:.1%} of the sustained "
                  "matmul ceiling")
    report = folder / "report" / run / "report.md"
    if report.exists():
        lines = report.read_text().splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("## Summary")), None)
        if start is not None:
            end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
            print("\n".join(lines[start:end]))
    else:
        print("   no report rendered")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="+", type=Path, help="copies of runs, each holding results/<run>/")
    for folder in parser.parse_args(argv).folders:
        try:
            summary(folder)
        except (OSError, StopIteration, KeyError, ValueError) as error:
            print(f"== {folder}: no cost records ({error!r})")


if __name__ == "__main__":
    main()
