"""Gather the per-job tables of section 2 into the section's three tables."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.atomic import write_csv


def aggregate(records: list[Path], out_dir: Path) -> dict[str, int]:
    """kernels.csv, ranges.csv (all passes' rows) and runs.csv (one row per pass of each job)."""
    records = [Path(r) for r in records]
    runs = []
    for path in records:
        record = result_files.read_json(path)
        record["captured_step_ms"] = json.dumps(record.get("captured_step_ms", []))
        record["files"] = " ".join(os.path.normpath(path.parent / f) for f in record.get("files", []))
        runs.append(record)
    kernels = result_files.read_csvs([r.parent / "kernels.csv" for r in records])
    ranges = result_files.read_csvs([r.parent / "ranges.csv" for r in records])
    write_csv(out_dir / "kernels.csv", kernels)
    write_csv(out_dir / "ranges.csv", ranges)
    write_csv(out_dir / "runs.csv", pd.DataFrame(runs))
    return {"runs": len(runs), "kernel rows": len(kernels), "range rows": len(ranges)}
