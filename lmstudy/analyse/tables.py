"""Reading and combining result tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.environment import ENVIRONMENT_COLUMNS


def read_result(path: Path) -> pd.DataFrame:
    """Read one result CSV, checked against what its producer writes (lmstudy.analyse.result_files)."""
    return result_files.read_csv(path)


def concat_results(paths: list[Path]) -> pd.DataFrame:
    return result_files.read_csvs(paths)


def _shown(value) -> str:
    """A value as the header shows it: a whole number read back as a float (a GPU index, 0.0) as 0."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def environment_of(frames: list[pd.DataFrame]) -> dict[str, str]:
    """The provenance shown in the report's header: each value seen, joined."""
    values: dict[str, set[str]] = {c: set() for c in ENVIRONMENT_COLUMNS}
    for frame in frames:
        for column in ENVIRONMENT_COLUMNS:
            if column in frame:
                values[column] |= {_shown(v) for v in frame[column].dropna().unique()}
    shown = {}
    for column, seen in values.items():
        if column == "date" and seen:
            ordered = sorted(seen)
            shown[column] = ordered[0] if len(ordered) == 1 else f"{ordered[0]} to {ordered[-1]}"
        else:
            shown[column] = ", ".join(sorted(seen)) if seen else "n/a"
    return shown


def steady_warmup(frame: pd.DataFrame) -> int:
    """The steady state's warm-up: the largest measured. Each fresh timing process runs max(warm-ups) +
    timed steps and warm-up w's row is the window after its first w (lmstudy.measure.timing), so the
    largest warm-up's window is the last of every process: the warmest."""
    return int(frame["warmup_steps"].max())


def steady_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of `frame` (timing rows, of any status) at its steady warm-up (steady_warmup): the
    steady-state numbers. Empty for an empty frame."""
    return frame[frame["warmup_steps"] == frame["warmup_steps"].max()]
