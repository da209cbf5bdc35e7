"""What each producer writes, and reading a result file checked against it.

Every result file the workflow reads back (a job's CSV, an aggregated
table, a job's JSON record) is read here. A file cut short, damaged or
written by something else must never turn into a wrong number or a wrong
finding (a table cut in half reports half the OOM configurations), so each
is checked against what its producer writes:

- whole: not empty, text, ending where a writer ends (pandas ends every CSV
  with a newline; a file cut mid-row does not), parseable;
- columns: those the readers rely on are there, with a value in every row;
- types: numeric columns hold numbers (a value cut to '0.8' or '0.8xx' is
  caught by the ending or here);
- completeness: one job's rows hold every combination of what it varies
  (every pass x warm-up of a timing job), each once.

What each producer writes is declared by the section that makes it (its
products.py, gathered by lmstudy.products). A bad file is named with the rule that
writes it and how to redo it. This module is in the analysis layer: pandas
only, never torch.
"""

from __future__ import annotations

import io
import json
from pathlib import Path, PurePosixPath

import pandas as pd

from lmstudy.errors import UserError, damaged_sentence
from lmstudy.products import Product, registered
from lmstudy.products import first_row as _row
from lmstudy.spreadsheet import restored_frame


class DamagedResult(UserError):
    """A result file is not what its producer writes; the message names it and how to redo it."""

    # Set by damaged(): the file, and what is wrong with it.
    path: str | Path = ""
    what: str = ""


def product_of(path: str | Path) -> Product | None:
    """The producer of the file at `path`, known by the end of its path; None for a file of unknown kind."""
    tail = PurePosixPath(Path(path).as_posix())
    return next((p for p in registered() if tail.match(p.pattern)), None)


def damaged(path: str | Path, what: str) -> DamagedResult:
    """The error for a bad file: what is wrong, and how to redo it (delete it, run Snakemake again)."""
    product = product_of(path)
    made_by = f"the {product.rule} job writes it" if product else "it was written by a program of this study"
    error = DamagedResult(damaged_sentence(path, what, made_by))
    error.path, error.what = path, what
    return error


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise damaged(path, "it is a directory") from None
    if not data:
        raise damaged(path, "it is empty")
    if b"\0" in data:
        raise damaged(path, "it holds binary data")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise damaged(path, "it is not UTF-8 text") from None
    # Every writer here ends its file with a newline; a file cut short ends mid-line.
    if not text.endswith("\n"):
        raise damaged(path, "it ends inside a line, as a file cut short does")
    return text


def read_csv(path: str | Path, missing_ok: bool = False) -> pd.DataFrame:
    """The table at `path`, checked against what its producer writes.

    `missing_ok`: an absent file is an empty table (a section switched off);
    otherwise it is an error naming the file.
    """
    path = Path(path)
    if not path.exists():
        if missing_ok:
            return pd.DataFrame()
        raise DamagedResult(f"{path} does not exist: run snakemake again to make it.")
    text = _text(path)
    if not text.strip():
        # What pandas writes for a table without columns: the producer had nothing.
        return pd.DataFrame()
    try:
        frame = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise damaged(path, f"not a readable CSV: {str(error).strip().splitlines()[-1]}") from None
    frame = restored_frame(frame)  # the names as measured, not as neutralised for a spreadsheet
    product = product_of(path)
    if product is not None:
        check(frame, product, path)
    return frame


def check(frame: pd.DataFrame, product: Product, path: str | Path) -> None:
    """Raise DamagedResult unless `frame` is a whole table as `product`'s rule writes it."""
    if frame.empty and product.may_be_empty:
        return
    missing = [c for c in product.required if c not in frame.columns]
    if missing:
        raise damaged(path, f"no column {', '.join(missing)}")
    if frame.empty:
        raise damaged(path, "it has a header but no rows")
    for column in product.required:
        blank = frame[column].isna()
        if blank.any():
            raise damaged(path, f"row {_row(blank)} has no {column}")
    for column in (c for c in product.numeric if c in frame.columns):
        values = frame[column]
        numbers = pd.to_numeric(values, errors="coerce")
        wrong = numbers.isna() & values.notna()
        if wrong.any():
            raise damaged(path, f"row {_row(wrong)} has {values[wrong].iloc[0]!r} for {column}, not a number")
        # No producer writes an infinite number: a division by a zero time, or a hand edit.
        infinite = numbers.isin([float("inf"), float("-inf")])
        if infinite.any():
            raise damaged(path, f"row {_row(infinite)} has {float(numbers[infinite].iloc[0])!r} for {column}")
    _check_measured(frame, product, path)
    for column in (c for c in product.samples if c in frame.columns):
        bad = frame[column].notna() & ~frame[column].map(_is_samples)
        if bad.any():
            cell = shorten(str(frame[column][bad].iloc[0]))
            raise damaged(path, f"row {_row(bad)} has {cell!r} for {column}, not a JSON list of step times")
    if product.consistent is not None:
        inconsistent = product.consistent(frame)
        if inconsistent:
            raise damaged(path, inconsistent)
    if product.grid:
        _check_complete(frame, product, path)


def _check_measured(frame: pd.DataFrame, product: Product, path) -> None:
    """A row of status "ok" holds its measurement: each `measured` column a finite number, not negative."""
    if not product.measured or "status" not in frame.columns:
        return
    ok = frame["status"] == "ok"
    for column in product.measured:
        if column not in frame.columns:
            if ok.any():  # (a job whose every row is OOM has no such column at all)
                raise damaged(path, f"row {_row(ok)} is ok but there is no column {column}")
            continue
        numbers = pd.to_numeric(frame[column], errors="coerce")
        bad = ok & ~(numbers >= 0)  # NaN (a blank or "nan") and negatives alike
        if bad.any():
            raise damaged(path, f"row {_row(bad)} is ok but has {float(numbers[bad].iloc[0])!r} for {column}")


def _is_samples(cell) -> bool:
    """Whether `cell` is what a producer writes for step samples: a JSON list of numbers, or of lists."""
    try:
        value = json.loads(cell) if isinstance(cell, str) else None
    except ValueError:
        return False
    if not isinstance(value, list):
        return False
    flat = [x for part in value for x in part] if all(isinstance(x, list) for x in value) else value
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in flat)


def shorten(text: str, limit: int = 60) -> str:
    """`text`, cut to `limit` characters with an ellipsis: a damaged cell may be long."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_complete(frame: pd.DataFrame, product: Product, path) -> None:
    keys = [*product.job, *product.grid]
    repeated = frame.duplicated(keys)
    if repeated.any():
        row = frame[repeated].iloc[0]
        raise damaged(path, f"row {_row(repeated)} repeats {_describe(row, keys)}")
    expected = set(frame[list(product.grid)].itertuples(index=False, name=None))
    for job, rows in frame.groupby(list(product.job), sort=False):
        have = set(rows[list(product.grid)].itertuples(index=False, name=None))
        wanted = expected
        if product.job_grid is not None:
            wanted = product.job_grid(dict(zip(product.job, job, strict=True)), expected)
        if have != wanted:
            job_text = _describe(pd.Series(dict(zip(product.job, job, strict=True))), product.job)
            missing = sorted(wanted - have, key=str)
            odd = missing[0] if missing else sorted(have - wanted, key=str)[0]
            grid_text = ", ".join(f"{k} {v}" for k, v in zip(product.grid, odd, strict=True))
            if missing:
                raise damaged(path, f"the rows of {job_text} lack {grid_text}, which such a job measures")
            raise damaged(path, f"the rows of {job_text} hold {grid_text}, which such a job does not measure")


def _describe(row: pd.Series, keys) -> str:
    return ", ".join(f"{k} {row[k]}" for k in keys)


def read_csvs(paths: list[str | Path]) -> pd.DataFrame:
    """Each table checked, then concatenated (tables without rows left out)."""
    frames = [read_csv(p) for p in paths]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def read_json(path: str | Path) -> dict:
    """The JSON record at `path`, checked to hold the keys its producer writes."""
    path = Path(path)
    if not path.exists():
        raise DamagedResult(f"{path} does not exist: run snakemake again to make it.")
    try:
        data = json.loads(_text(path))
    except json.JSONDecodeError as error:
        raise damaged(path, f"not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise damaged(path, f"it holds a JSON {type(data).__name__}, not an object")
    product = product_of(path)
    missing = [k for k in (product.required if product else ()) if k not in data]
    if missing:
        raise damaged(path, f"no {', '.join(missing)}")
    return data
