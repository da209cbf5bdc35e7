"""What a run did not measure: each section's grid against the full study's (config.yaml, preset full).

A preset (quick, smoke) or a user's --config measures part of the study. A section that says "small to
2.7B" without saying that medium, large and xl were left out lets a reader believe the trend covers
them, so each section names what the full study has and this run lacks, computed from its rows.
No torch, no matplotlib.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import pandas as pd

# How a sentence names each key of a section's config.
WORDS = {
    "sizes": "sizes",
    "context_lengths": "context lengths",
    "context_length": "context length",
    "passes": "passes",
    "precisions": "precisions",
    "head_dims": "head dims d",
    "seq_lens": "sequence lengths",
    "rungs": "rungs",
}


# The full study's grids, by section, as the report job is handed them (use_full_study).
_FULL_STUDY: dict = {}


def use_full_study(study: dict) -> None:
    """The full study to compare this run with (lmstudy.config.full_study(), a param of the report
    job): set by the report's command before it renders."""
    _FULL_STUDY.clear()
    _FULL_STUDY.update(study)
    _checkout_section.cache_clear()


def study_section(section: str) -> dict:
    """The full study's config of `section` (or its sizes): as handed (use_full_study); the library used
    outside a job (a test, a notebook) reads this checkout's config.yaml."""
    value = _FULL_STUDY.get(section) if _FULL_STUDY else _checkout_section(section)
    return value if isinstance(value, dict) else {}


@functools.cache
def _checkout_section(section: str):
    from lmstudy.config import study_value

    try:
        return study_value(section)
    except Exception:  # noqa: BLE001 - no readable config.yaml beside the code: nothing to compare with
        return {}


def _shown(value) -> str:
    from lmstudy.report.labels import PASS_LABELS

    return PASS_LABELS.get(str(value), str(value))


# The rows' column that holds each config key's values.
COLUMNS = {"sizes": "size", "context_lengths": "context_length", "context_length": "context_length",
           "passes": "pass", "precisions": "precision", "head_dims": "head_dim", "seq_lens": "seq_len",
           "rungs": "rung_key"}


def not_measured_in(section: str, rows, *keys: str) -> str:
    """not_measured of the config `keys` whose values `rows` hold in their columns (COLUMNS)."""
    return not_measured(section, {key: rows[COLUMNS[key]] for key in keys if COLUMNS[key] in rows})


def not_measured(section: str, measured: dict[str, Iterable]) -> str:
    """One sentence naming, per key, the values of the full study's `section` config that `measured`
    (the values this run's rows hold) lacks; "" where the run covers the full study."""
    study = study_section(section)
    parts = []
    for key, seen in measured.items():
        full = study.get(key)
        if full is None:
            continue
        full = full if isinstance(full, list) else [full]
        seen = {str(v) for v in seen}
        missing = [v for v in full if str(v) not in seen]
        if missing:
            parts.append(f"{WORDS.get(key, key)} {', '.join(_shown(v) for v in missing)}")
    if not parts:
        return ""
    return ("Not measured in this run, though the full study (config.yaml, preset full) has them: "
            + "; ".join(parts) + ".")


def column(rows: pd.DataFrame, name: str, fill=float("nan")) -> pd.Series:
    """`rows[name]`, or `fill` in every row where the run wrote no such column: a model of the user's
    own, a CPU or a preset records less than the built-in model on a GPU in the full study, and a
    section says what was not recorded (not_recorded) instead of failing on a column it lacks."""
    if name in rows:
        return rows[name]
    return pd.Series(fill, index=rows.index)


def recorded(rows: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows of `rows` that hold a value in column `name` (none where the run wrote no such column)."""
    return rows[column(rows, name).notna()]


def with_columns(rows: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    """`rows` with each column of `names` it lacks added, empty (a value not recorded, shown as n/a),
    and the absent ones kept in rows.attrs["not_recorded"], which the section's opening names
    (not_recorded). For the columns a section reads that only some runs write."""
    absent = [name for name in names if name not in rows]
    if not absent:
        return rows
    return name_absent(rows.assign(**{name: float("nan") for name in absent}), absent)


def name_absent(rows: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    """`rows` with each column of `names` it lacks (or holds no value in) kept in rows.attrs["not_recorded"]
    (not_recorded names them), not added: for the columns a section reads through column() or
    first_count(), which show n/a themselves, where an added empty column would mislead a check for it."""
    absent = [name for name in names if name not in rows or rows[name].isna().all()]
    if absent:
        rows.attrs["not_recorded"] = [*rows.attrs.get("not_recorded", []), *absent]
    return rows


def lacks(rows: pd.DataFrame, name: str) -> bool:
    """Whether `rows` (read through with_columns) lack column `name`: the words that need it say so."""
    return name in rows.attrs.get("not_recorded", [])


def also_not_recorded(rows: pd.DataFrame, *others: pd.DataFrame) -> pd.DataFrame:
    """`rows` naming too what each of `others` (read through with_columns) lacks: a section's opening
    reads one frame, while its tables may come from several products."""
    absent = [name for frame in (rows, *others) for name in frame.attrs.get("not_recorded", [])]
    if absent:
        rows.attrs["not_recorded"] = list(dict.fromkeys(absent))
    return rows


def not_recorded(rows: pd.DataFrame) -> str:
    """One sentence naming what `rows` (read through with_columns) lack; "" where they lack nothing."""
    from lmstudy.report.labels import column_label

    absent = list(dict.fromkeys(rows.attrs.get("not_recorded", [])))
    if not absent:
        return ""
    return ("Not recorded in this run, so shown as n/a or left out: "
            + "; ".join(column_label(name) for name in absent) + ".")


def own_models(rows: pd.DataFrame) -> str:
    """The names of the models of the user's own that `rows` measured (column model), joined; "" where
    they are the built-in model's (or name none): what only the built-in model records, theirs lack."""
    from lmstudy.model_choice import BUILTIN_NAME

    names = column(rows, "model").dropna().astype(str).unique()
    return ", ".join(sorted(n for n in names if n != BUILTIN_NAME))


def first_count(rows: pd.DataFrame, name: str) -> int | str:
    """The first whole number in column `name` of `rows` (a setting every row repeats: batch size,
    steps), or "n/a" where the run recorded none."""
    values = pd.to_numeric(column(rows, name), errors="coerce").dropna()
    return int(values.iloc[0]) if len(values) else "n/a"
