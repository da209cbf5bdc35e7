"""A finding: one computed sentence, with the rows it was computed from and the function that did it.

A Finding is a str, so that it reads, joins and compares as its sentence; it also
carries `data` (the rows behind the sentence, as a DataFrame) and `computed_by`
(the dotted name of the function that wrote it). The report writes each
finding's data to a CSV of its own and links it beside the sentence, as it does
for tables: a reader traces every number of a finding to its rows and its code.

A section's findings are small functions marked with @finds, each returning its
findings (none where its data is missing); ``Finding(sentence, rows)`` builds one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

import pandas as pd


class Finding(str):
    data: pd.DataFrame
    computed_by: str
    csv: str  # its data's CSV relative to the report, set when rendering

    def __new__(cls, text: str, data: pd.DataFrame | Mapping, computed_by: str = "") -> Finding:
        finding = super().__new__(cls, text)
        finding.data = _frame(data)
        finding.computed_by = computed_by
        finding.csv = ""
        return finding

    def __reduce__(self):
        return (Finding, (str(self), self.data, self.computed_by))


def _frame(data: pd.DataFrame | pd.Series | Mapping) -> pd.DataFrame:
    """The data as rows: a named index (a configuration's key) becomes columns, a position is dropped."""
    if isinstance(data, pd.Series):
        data = data.to_frame().T if data.name is None or not any(data.index.names) else data.to_frame()
    elif isinstance(data, Mapping):
        data = pd.DataFrame([dict(data)])
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"a finding's data is a DataFrame or a mapping of numbers, not {type(data).__name__}")
    return data.reset_index(drop=not any(data.index.names))


def finds(function):
    """Mark `function` as one of a section's findings: each Finding it returns is credited to it.

    It returns a list of Finding (or one Finding, or None); a plain string is refused, since a
    finding without the data behind it cannot be traced."""
    name = f"{function.__module__}.{function.__qualname__}"

    @functools.wraps(function)
    def wrapper(*args, **kwargs) -> list[Finding]:
        said = function(*args, **kwargs)
        said = [] if said is None else [said] if isinstance(said, str) else list(said)
        for finding in said:
            if not isinstance(finding, Finding):
                raise TypeError(f"{name} returned a sentence without its data: return Finding(text, rows)")
            finding.computed_by = finding.computed_by or name
        return said

    wrapper.finds = True
    return wrapper


# The columns that name a configuration, in the order a finding's rows show them.
CONFIGURATION = ("size", "context_length", "pass", "precision", "variant")


def rows_behind(frame: pd.DataFrame, *columns: str, key: Iterable[str] = CONFIGURATION) -> pd.DataFrame:
    """A configuration's `key` and `columns` of `frame`, those it has (a named index counts as
    columns): the rows behind a sentence, restricted to what the sentence used."""
    if any(frame.index.names):
        frame = frame.reset_index()
    key = [c for c in key if c in frame]
    behind = frame[key + [c for c in dict.fromkeys(columns) if c in frame and c not in key]]
    return behind.rename_axis(columns=None)  # a pivot's columns are named after what they spread


def with_used(considered: pd.DataFrame, used: pd.DataFrame) -> pd.DataFrame:
    """Every row a sentence considered, `used` marking those it counted: "k of n left out" traces."""
    return considered.assign(used=considered.index.isin(used.index))


def gather(*groups: Iterable[Finding]) -> list[Finding]:
    """The findings of several functions, in order."""
    return [finding for group in groups for finding in group]
