#!/usr/bin/env python
"""A run's job-seconds by rule and phase, from its cost section's records: the benchmark table a
closing note gives (issues 37 and 39).

    python tools/cost_totals.py NAME results/<run>/cost/jobs.csv

One line per rule (jobs, job-seconds, then each phase's seconds, the phases the record has), then
the run's total and its measuring jobs' total. Reads the CSV only.
"""

from __future__ import annotations

import sys

import pandas as pd


def main(name: str, path: str) -> None:
    jobs = pd.read_csv(path)
    phases = [c for c in jobs.columns if c.endswith("_s") and c not in ("wall_s", "waited_s")
              and not c.endswith("repeat_s")]
    by_rule = jobs.groupby("rule").agg(jobs=("job", "size"), wall_s=("wall_s", "sum"),
                                       **{p: (p, "sum") for p in phases})
    by_rule = by_rule.sort_values("wall_s", ascending=False)
    print(f"# {name}: {len(jobs)} jobs, {jobs['wall_s'].sum():.0f} job-s; measuring jobs "
          f"{jobs.loc[jobs['measuring'].astype(bool), 'wall_s'].sum():.0f} job-s")
    print(by_rule.round(1).to_string())


if __name__ == "__main__":
    main(*sys.argv[1:3])
