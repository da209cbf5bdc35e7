"""lmstudy.rates: the study's one home for tokens/s, achieved TFLOP/s and MFU.

The fixtures are rows of a real H200 run (quick preset, code b9d9ffa: tests/fixtures/rates/,
a few rows of its timing, compile, ladder, attention and matmul tables, written before the
rates had one home): the one module gives the numbers the jobs wrote then.
"""

from __future__ import annotations

import ast
import csv
import math
from pathlib import Path

import pandas as pd
import pytest

from lmstudy import rates
from lmstudy.flops import matmul_flops

FIXTURES = Path(__file__).parent / "fixtures" / "rates"
ROOT = Path(__file__).resolve().parent.parent


def _rows(name: str) -> list[dict]:
    with open(FIXTURES / name, newline="") as f:
        return list(csv.DictReader(f))


def _close(a, b) -> bool:
    # The fixture's tables kept 16 decimals: the last digits of a small MFU are gone.
    return math.isclose(a, b, rel_tol=1e-12)


@pytest.mark.parametrize("table", ["timing.csv", "compile.csv"])
def test_step_rates_are_the_rows_a_gpu_run_wrote(table):
    rows = _rows(table)
    assert rows
    for row in rows:
        ms = float(row["median_ms"])
        tokens = int(row["batch_size"]) * int(row["context_length"])
        flops = float(row["flops_per_step"])
        got = rates.step_rates(ms, tokens=tokens, flops=flops, peak_tflops=float(row["peak_tflops"]))
        for column in ("tokens_per_s", "achieved_tflops", "mfu"):
            assert _close(got[column], float(row[column])), (table, column, row)
        # and to the bit, the arithmetic the jobs did before
        assert got["tokens_per_s"] == tokens / (ms / 1e3)
        assert got["achieved_tflops"] == flops / (ms / 1e3) / 1e12
        assert got["mfu"] == flops / (ms / 1e3) / 1e12 / float(row["peak_tflops"])


def test_attention_and_ladder_rates_are_the_rows_a_gpu_run_wrote():
    for row in _rows("attention.csv"):
        b, seq, d = int(row["batch_size"]), int(row["seq_len"]), int(row["head_dim"])
        flops = 4 * b * seq * seq * d  # lmstudy.analyse.attention_memory.attention_flops
        assert _close(
            rates.achieved_tflops(flops, ms=float(row["forward_median_ms"])), float(row["forward_tflops"])
        )
        backward = rates.achieved_tflops(2 * flops, ms=float(row["backward_median_ms"]))
        assert _close(backward, float(row["backward_tflops"]))
    for row in _rows("ladder.csv"):
        achieved = rates.achieved_tflops(float(row["flops_per_step"]), ms=float(row["median_ms"]))
        assert _close(achieved, float(row["achieved_tflops"]))
        share = rates.share_of_peak(float(row["achieved_tflops"]), float(row["matmul_tflops"]))
        assert _close(share, float(row["share_of_matmul"]))
    for row in _rows("matmul.csv"):
        seconds = float(row["burst_ms"]) / 1e3  # the table keeps milliseconds, the job had seconds
        got = rates.achieved_tflops(matmul_flops(int(row["n"]), int(row["products"])), seconds=seconds)
        assert math.isclose(got, float(row["tflops"]), rel_tol=1e-12)


def test_the_attention_flops_of_the_fixture_are_the_library_s():
    from lmstudy.analyse.attention_memory import attention_flops

    assert attention_flops(8, 1024, 64) == 4 * 8 * 1024 * 1024 * 64


@pytest.mark.parametrize("missing", [None, math.nan, 0, 0.0, -1.0])
def test_a_missing_or_non_positive_divisor_gives_no_rate(missing):
    assert rates.tokens_per_second(1024, ms=missing) is None
    assert rates.tokens_per_second(1024, seconds=missing) is None
    assert rates.achieved_tflops(1e12, ms=missing) is None
    assert rates.share_of_peak(10.0, missing) is None


@pytest.mark.parametrize("missing", [None, math.nan, 0, 0.0])
def test_no_flops_counted_gives_no_rate_and_no_mfu(missing):
    assert rates.achieved_tflops(missing, ms=10.0) is None
    got = rates.step_rates(10.0, tokens=1024, flops=missing, peak_tflops=989.4)
    assert got["achieved_tflops"] is None and got["mfu"] is None
    assert got["tokens_per_s"] == 1024 / (10.0 / 1e3)


def test_no_peak_off_a_gpu_gives_no_mfu_but_the_other_rates():
    got = rates.step_rates(10.0, tokens=1024, flops=2e11, peak_tflops=None)
    assert got["mfu"] is None
    assert got["achieved_tflops"] == pytest.approx(20.0)


def test_columns_get_nan_where_a_number_gets_none():
    achieved = pd.Series([10.0, 20.0, math.nan, 5.0])
    peak = pd.Series([100.0, 0.0, 50.0, math.nan])
    share = rates.share_of_peak(achieved, peak)
    assert share.iloc[0] == 0.1
    assert share.iloc[1:].isna().all()
    assert rates.share_of_peak(achieved, None).isna().all()
    assert rates.share_of_peak(achieved, 0.0).isna().all()
    assert list(rates.share_of_peak(achieved, 10.0).iloc[[0, 1, 3]]) == [1.0, 2.0, 0.5]
    per_s = rates.tokens_per_second(pd.Series([1000, 1000]), ms=pd.Series([10.0, 0.0]))
    assert per_s.iloc[0] == 1000 / (10.0 / 1e3) and math.isnan(per_s.iloc[1])


def test_the_time_is_given_once():
    with pytest.raises(TypeError):
        rates.tokens_per_second(1024)
    with pytest.raises(TypeError):
        rates.achieved_tflops(1e12, seconds=1.0, ms=1000.0)


def _divides_by_a_tera(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and isinstance(node.right, ast.Constant)
        and node.right.value in (1e12, 10**12)
    )


def test_no_module_but_rates_computes_a_tflop_rate():
    """TFLOP/s has one home: no other module of the library divides by 1e12."""
    found = []
    for path in sorted((ROOT / "lmstudy").rglob("*.py")):
        if path.name == "rates.py":
            continue
        tree = ast.parse(path.read_text())
        found += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree) if _divides_by_a_tera(n)]
    assert not found, f"TFLOP/s computed outside lmstudy.rates: {found}"
