"""Which function computed a table: so that a reader can trace any number of the report to its code.

No torch, no matplotlib: the analysis (lmstudy.analyse.nsys.tables) and the report
sections both mark their table functions with it.
"""

from __future__ import annotations

import functools

import pandas as pd

ATTR = "computed_by"


def computes_table(function):
    """Mark `function`'s DataFrame with the function's dotted name (DataFrame.attrs)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        frame = function(*args, **kwargs)
        if isinstance(frame, pd.DataFrame):
            frame.attrs[ATTR] = f"{function.__module__}.{function.__qualname__}"
        return frame

    return wrapper


def computed_by(frame: pd.DataFrame) -> str:
    """The dotted name of the function that computed `frame`, or ''."""
    return str(frame.attrs.get(ATTR, ""))
