"""What a producer writes: a kind of result file, declared by the section that makes it.

Each section's products module (lmstudy/sections/<name>/products.py) lists
its products; ``registered()`` gathers them and lmstudy.analyse.result_files
checks every file read back against its product. A module of their own, apart
from the section's jobs, so that editing a check reruns the rules that read the
files (their code versions follow the import below) and no measurement.
Torch-free and pandas-free.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable

from lmstudy.registry import NAMES


@dataclasses.dataclass(frozen=True)
class Product:
    """One kind of result file, as its producer writes it."""

    pattern: str  # the end of its path, as PurePath.match reads it: "timing/raw/*.csv"
    rule: str  # the Snakemake rule that writes it
    required: tuple[str, ...] = ()  # columns (or JSON keys) with a value in every row
    numeric: tuple[str, ...] = ()  # columns whose values, where present, are numbers
    job: tuple[str, ...] = ()  # the columns that name one job's rows ...
    grid: tuple[str, ...] = ()  # ... which hold every combination of these, once each
    may_be_empty: bool = False  # a table without rows (nothing to report) is whole
    # The part of the file's grid that one job measures (default: all of it).
    job_grid: Callable[[dict, set], set] | None = None
    # Numbers a row of status "ok" always holds, finite and not negative: the measurement itself.
    measured: tuple[str, ...] = ()
    # Columns of per-process step samples: a JSON list of numbers, or of lists of them, where present.
    samples: tuple[str, ...] = ()
    # What the producer's rows satisfy between their columns (a pandas DataFrame in, never imported
    # here): a sentence naming a row that does not, or None.
    consistent: Callable | None = None


def first_row(mask) -> int:
    """The line number in the file of the first row in `mask` (a boolean Series; the header is line 1)."""
    return int(mask.to_numpy().nonzero()[0][0]) + 2


@functools.cache
def registered() -> tuple[Product, ...]:
    """Every section's products, in the registry's order."""
    found = []
    for name in NAMES:
        try:
            module = importlib.import_module(f"lmstudy.sections.{name}.products")
        except ModuleNotFoundError as error:
            if error.name != f"lmstudy.sections.{name}.products":
                raise
            continue  # a section whose jobs and aggregation write nothing it reads back
        found.extend(module.PRODUCTS)
    return tuple(found)
