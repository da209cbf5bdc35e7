"""Steady state = the largest warm-up measured, defined once (lmstudy.analyse.tables.steady_rows)."""

from __future__ import annotations

import re

import pandas as pd

from lmstudy.analyse.tables import steady_rows, steady_warmup

from .conftest import REPO


def _rows():
    return pd.DataFrame([
        {"pass": "forward", "warmup_steps": 0, "status": "ok", "median_ms": 9.0},
        {"pass": "forward", "warmup_steps": 5, "status": "ok", "median_ms": 2.0},
        {"pass": "train_step", "warmup_steps": 0, "status": "ok", "median_ms": 30.0},
        {"pass": "train_step", "warmup_steps": 1, "status": "ok", "median_ms": 7.0},
        # the window after 5 warm-ups was not reached: the steady row is OOM, not warm-up 1's
        {"pass": "train_step", "warmup_steps": 5, "status": "OOM", "median_ms": None},
    ])


def test_the_steady_rows_are_those_of_the_largest_warmup_of_any_status():
    frame = _rows()
    steady = steady_rows(frame)
    assert steady_warmup(frame) == 5 and isinstance(steady_warmup(frame), int)
    assert list(steady["pass"]) == ["forward", "train_step"]
    assert list(steady["status"]) == ["ok", "OOM"]
    assert steady_rows(frame[frame["status"] == "ok"])["median_ms"].tolist() == [2.0]


def test_no_rows_have_no_steady_rows():
    assert steady_rows(_rows().iloc[:0]).empty


def test_the_report_and_the_comparison_derive_it_nowhere_else():
    pattern = re.compile(r"warmup_steps\"?\]?\.max\(\)|max\(warmup")
    elsewhere = [
        str(path.relative_to(REPO)) for folder in ("lmstudy/analyse", "lmstudy/report")
        for path in (REPO / folder).rglob("*.py")
        if pattern.search(path.read_text()) and path != REPO / "lmstudy/analyse/tables.py"
    ]
    assert elsewhere == []
