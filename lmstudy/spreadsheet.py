"""Every CSV the project writes may be opened in a spreadsheet, by people.

A spreadsheet evaluates a cell that starts with =, +, - or @ (and, in some,
a tab or carriage return first) as a formula, and names in the tables come
from elsewhere: a kernel's name from a profile, a run's or size's name from a
config, a config string. So a text cell starting so gets a leading
apostrophe, which spreadsheets show as nothing and take as "this is text"
(OWASP's advice for CSV injection). Numbers, and text that reads as a number
("-3.5"), stay as they are: a spreadsheet would read them as the same number.
lmstudy.atomic.write_csv, the one CSV writer, neutralises so; the project's
reader (lmstudy.analyse.result_files) takes the apostrophe off again, so a
name reads back as it was measured.
"""

from __future__ import annotations

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value):
    """`value`, with an apostrophe first if a spreadsheet would take it as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _is_number(value):
        return "'" + value
    return value


def restored_cell(value):
    """safe_cell undone: `value` without the apostrophe safe_cell put first."""
    if isinstance(value, str) and value.startswith("'") and safe_cell(value[1:]) == value:
        return value[1:]
    return value


def _mapped(frame: pd.DataFrame, cell, header) -> pd.DataFrame:
    # By position: headers may repeat, and text columns may be of object or string dtype;
    # a numeric column holds no text, and is left as it is (a large table's cost).
    columns = {
        i: frame.iloc[:, i] if frame.iloc[:, i].dtype.kind in "biufcmM" else frame.iloc[:, i].map(cell)
        for i in range(frame.shape[1])
    }
    mapped = pd.DataFrame(columns, index=frame.index)
    mapped.columns = [header(c) for c in frame.columns]
    return mapped


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell and header made safe for a spreadsheet (safe_cell)."""
    return _mapped(frame, safe_cell, lambda c: safe_cell(str(c)))


def restored_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """safe_frame undone: the table as it was before its CSV was written."""
    return _mapped(frame, restored_cell, restored_cell)
