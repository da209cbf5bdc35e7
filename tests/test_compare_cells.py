"""The wording the sections' comparisons share (lmstudy/report/compare.j2, its numbers and cases chosen in
lmstudy.report.compare_cells): each case of a ratio, a band, verdict counts and the verdict rule, as the
comparison report says them."""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.analyse.compare import verdict as V
from lmstudy.report import compare_cells as cells
from lmstudy.report.contract import words


def test_a_ratio_reads_faster_slower_or_as_fast():
    assert cells.times(0.5) == "2.00× faster"
    assert cells.times(1.25) == "1.25× slower"
    assert cells.times(1.004) == "as fast (1.00×)" and cells.times(0.996) == "as fast (1.00×)"
    assert cells.times(math.nan) == "nan× slower"


def test_a_band_and_the_verdict_rule_name_each_measures_band():
    assert cells.band_words(0.03) == "0.971–1.030 (3%)"
    rule = cells.verdict_rule(0.03, 0.015)
    assert "wall time's 0.971–1.030 (3%) (compare.min_effect)" in rule
    assert "busy time's 0.985–1.015 (1.5%) (compare.gpu_min_effect:" in rule
    assert f"(its {V.POOLED_CONFIDENCE:.0%} quantile)" in rule
    assert "  " not in rule and rule.endswith("(compare.gpu_agreement).")


def test_counts_follow_the_verdicts_order_and_a_ratio_only_where_decided():
    verdicts = pd.Series(["weird", V.UNDECIDED, V.SLOWER, V.SLOWER], dtype=object)
    assert cells.counts(verdicts) == "2 slower, 1 undecided, 1 weird"
    rows = pd.DataFrame(
        {
            "verdict": [V.SLOWER, V.UNDECIDED, V.SLOWER],
            "ratio": [1.8, 1.0, 1.9],
            "gpu_verdict": [V.UNDECIDED] * 3,
            "gpu_ratio": [1.0] * 3,
            "kernels_verdict": [V.EQUAL, V.EQUAL, V.DIFFERS],
        }
    )
    assert cells.measure_counts(rows) == (
        "wall time 2 slower, 1 undecided (median B/A 1.850 over the 2 decided); "
        "GPU time 3 undecided (no ratio stated); kernels per step 2 equal, 1 differs"
    )
    # A measure neither run measured is left out.
    assert cells.measure_counts(rows.assign(gpu_verdict=V.TOO_FEW, kernels_verdict=V.TOO_FEW)) == (
        "wall time 2 slower, 1 undecided (median B/A 1.850 over the 2 decided)"
    )


def test_a_configuration_names_its_precision_where_it_has_one():
    row = {"size": "small", "context_length": 256.0, "pass": "train_step"}
    assert cells.config_label(pd.Series(row)) == "small ctx 256 training step"
    assert cells.config_label(pd.Series({**row, "precision": "bf16"})) == "small ctx 256 training step bf16"


def test_the_comparisons_title_names_b_against_a():
    assert words("report", "compare.j2", "title", a="qb", b="qe") == "Comparison: qe (B) against qb (A)"


def test_the_comparison_says_how_a_compiled_row_is_judged():
    from lmstudy.report.compare_cells import compiled_rule

    said = compiled_rule(0.13)
    assert "one compilation a run" in said and "1 ± 13%" in said and "compare.compiled_agreement" in said
