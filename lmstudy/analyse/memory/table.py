"""The section's table: one row per configured snapshot, measured or skipped."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.analyse.memory.summary import table_row

KEY = ("size", "context_length", "pass", "precision")


def config_name(size: str, context_length: int, pass_name: str, precision: str) -> str:
    """The file stem of one configuration's snapshot and summary."""
    return f"{size}_ctx{context_length}_{pass_name}_{precision}"


def build(
    sizes: list[str],
    context_lengths: list[int],
    passes: list[str],
    precisions: list[str],
    summaries: list[Path],
    results: Path,
    skipped_reason: str = "",
) -> pd.DataFrame:
    """Rows in config order; a configuration without a summary is `skipped`."""
    found = {}
    for path in summaries:
        summary = result_files.read_json(path)
        row = table_row(summary, os.path.relpath(Path(path).parent, results))
        row["snapshot"] = os.path.relpath(summary["snapshot"], results)
        found[tuple(row.get(k) for k in KEY)] = row
    rows = []
    for size, ctx, pass_name, precision in itertools.product(sizes, context_lengths, passes, precisions):
        key = (size, int(ctx), pass_name, precision)
        row = found.pop(key, None)
        if row is None:
            row = dict(
                zip(KEY, key, strict=True), status="skipped", stage="", error=skipped_reason or "not run"
            )
        rows.append(row)
    rows += list(found.values())  # summaries of configurations no longer configured
    return pd.DataFrame(rows)
