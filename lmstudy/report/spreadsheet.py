"""The report's CSV tables are for people, who open them in a spreadsheet.

A spreadsheet evaluates a cell that starts with =, +, - or @ (and, in some,
a tab or carriage return first) as a formula, and names in the tables come
from elsewhere: a kernel's name from a profile, a run's or size's name from a
config, a config string. So a text cell starting so gets a leading
apostrophe, which spreadsheets show as nothing and take as "this is text"
(OWASP's advice for CSV injection). Numbers, and text that reads as a number
("-3.5"), stay as they are: a spreadsheet would read them as the same number.
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


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell and header made safe for a spreadsheet (safe_cell)."""
    # By position: headers may repeat, and text columns may be of object or string dtype.
    columns = {i: frame.iloc[:, i].map(safe_cell) for i in range(frame.shape[1])}
    safe = pd.DataFrame(columns, index=frame.index)
    safe.columns = [safe_cell(str(c)) for c in frame.columns]
    return safe
