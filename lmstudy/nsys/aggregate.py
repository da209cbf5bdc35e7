"""Gather the per-job tables of section 2 into the section's three tables."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lmstudy.atomic import write_csv


def _read(paths: list[Path]) -> pd.DataFrame:
    frames = [pd.read_csv(p) for p in paths if p.exists() and p.stat().st_size > 0]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def aggregate(records: list[Path], out_dir: Path) -> dict[str, int]:
    """kernels.csv, ranges.csv (all jobs' rows) and runs.csv (one row per job)."""
    records = [Path(r) for r in records]
    runs = []
    for path in records:
        record = json.loads(path.read_text())
        record["captured_step_ms"] = json.dumps(record.get("captured_step_ms", []))
        record["files"] = " ".join(str(path.parent / f) for f in record.get("files", []))
        runs.append(record)
    kernels = _read([r.parent / "kernels.csv" for r in records])
    ranges = _read([r.parent / "ranges.csv" for r in records])
    write_csv(out_dir / "kernels.csv", kernels)
    write_csv(out_dir / "ranges.csv", ranges)
    write_csv(out_dir / "runs.csv", pd.DataFrame(runs))
    return {"runs": len(runs), "kernel rows": len(kernels), "range rows": len(ranges)}
