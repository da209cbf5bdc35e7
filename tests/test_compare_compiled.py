"""A row measured under torch.compile is one compilation a run: a comparison does not call the
compiler's own choices a change (lmstudy.analyse.compare.compiled, compare.compiled_agreement).

The fixtures are two real quick studies of the same model on one H200 node (README beside them):
the CUDA-graph ladder rung compiled to kernels 12.7% apart in GPU time while each run's two
processes, sharing their job's compilation, agreed within 0.3%."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse.compare import verdict as V
from lmstudy.analyse.compare.compiled import compiled_once
from lmstudy.analyse.compare.runs import Run
from lmstudy.config import study_value
from lmstudy.sections.compile.compare import compile_rows
from lmstudy.sections.ladder.compare import ladder_rows

FIXTURES = Path(__file__).parent / "fixtures" / "gpu" / "compiled_twice"
NOISE = V.noise_of_study()
MIN_EFFECT = study_value("compare", "min_effect")
CUDA_GRAPHS = "bf16-sdpa-cudagraphs-master"


def run(name: str) -> Run:
    tables = {table: pd.read_csv(FIXTURES / f"{table}_{name}.csv") for table in ("ladder", "compile")}
    return Run(name, FIXTURES, tables)


def test_two_compilations_of_one_model_are_not_called_a_change():
    rungs = ladder_rows(run("qnew"), run("qold"), MIN_EFFECT, NOISE).set_index("rung_key")
    cuda_graphs = rungs.loc[CUDA_GRAPHS]
    assert cuda_graphs["gpu_ratio"] == pytest.approx(1.127, abs=0.002)
    assert cuda_graphs["gpu_verdict"] == V.UNDECIDED
    assert cuda_graphs["gpu_ci_low"] < 1 < cuda_graphs["gpu_ci_high"]
    # The eager rungs ran the same kernels in both runs: their GPU times still agree within the band.
    assert (rungs.drop(CUDA_GRAPHS)["gpu_verdict"] == V.SAME).all()
    assert not rungs.drop(CUDA_GRAPHS)["compiled_once"].any() and cuda_graphs["compiled_once"]


def test_without_the_compilers_agreement_the_same_rows_would_be_called_changed():
    shared = dataclasses.replace(NOISE, compiled_agreement=0.0)
    rungs = ladder_rows(run("qnew"), run("qold"), MIN_EFFECT, shared).set_index("rung_key")
    assert rungs.loc[CUDA_GRAPHS, "gpu_verdict"] == V.SLOWER
    steps = compile_rows(run("qnew"), run("qold"), MIN_EFFECT, shared)
    compiled = steps[steps["mode"] == "compiled"].iloc[0]
    assert compiled["gpu_verdict"] == V.FASTER


def test_the_compile_sections_compiled_rows_are_widened_and_its_eager_rows_are_not():
    steps = compile_rows(run("qnew"), run("qold"), MIN_EFFECT, NOISE).set_index("mode")
    assert steps.loc["compiled", "gpu_verdict"] == V.UNDECIDED
    assert steps.loc["eager", "gpu_verdict"] == V.SAME
    width = steps.loc["compiled", "gpu_ci_high"] / steps.loc["compiled", "gpu_ci_low"]
    assert width >= (1 + NOISE.compiled_agreement) ** 2 * 0.999
    low, high = steps.loc["compiled", ["ci_low", "ci_high"]]
    assert high / low >= (1 + NOISE.compiled_agreement) ** 2 * 0.999


def test_a_change_beyond_what_compilations_differ_by_is_still_called():
    b = run("qold")
    ladder = b["ladder"].copy()
    at = ladder["rung_key"] == CUDA_GRAPHS
    for column in ("gpu_busy_ms", "median_ms"):
        ladder.loc[at, column] *= 2
    ladder.loc[at, "gpu_busy_ms_processes"] = ladder.loc[at, "gpu_busy_ms_processes"].map(
        lambda cell: str([2 * float(x) for x in cell.strip("[]").split(",")]))
    ladder.loc[at, "step_times_ms"] = ladder.loc[at, "step_times_ms"].map(
        lambda cell: str([[2 * x for x in process] for process in V.processes_of(cell)]))
    doubled = Run("doubled", b.folder, {**b.tables, "ladder": ladder})
    rungs = ladder_rows(run("qnew"), doubled, MIN_EFFECT, NOISE).set_index("rung_key")
    assert rungs.loc[CUDA_GRAPHS, "gpu_verdict"] == V.SLOWER


@pytest.mark.parametrize(("column", "value", "compiled"), [
    ("mode", "compiled", True), ("mode", "eager", False),
    ("variant", "sdpa-compile", True), ("variant", "naive-compile", True), ("variant", "sdpa", False),
    ("rung_key", "bf16-sdpa-compile", True), ("rung_key", "bf16-sdpa-cudagraphs-master", True),
    ("rung_key", "bf16-sdpa", False), ("rung_key", "not-a-rung", False),
    # Compiled attention alone agreed between compilations as eager attention did.
    ("implementation", "naive-compile", False),
])
def test_which_rows_are_one_compilation_a_run(column, value, compiled):
    assert compiled_once(pd.DataFrame({column: [value]})).tolist() == [compiled]


def test_the_row_says_it_was_compiled_once():
    rungs = ladder_rows(run("qnew"), run("qold"), MIN_EFFECT, NOISE).set_index("rung_key")
    assert "one compilation a run" in rungs.loc[CUDA_GRAPHS, "reading"]
    assert "one compilation a run" not in rungs.loc["fp32", "reading"]


def test_the_configured_agreement_covers_every_two_compilations_measured():
    """compare.compiled_agreement against 8 compilations of each cell on H200s: one compilation
    against any other lies within it, and well beyond what the eager rows of the same jobs show."""
    measured = pd.read_csv(FIXTURES / "agreement_h200.csv")
    spread = measured.groupby("cell")["gpu_ms"].agg(lambda ms: ms.max() / ms.min() - 1)
    assert measured.groupby("cell").size().min() >= 8
    assert spread.max() <= NOISE.compiled_agreement
    # The spread is the compiler's: the same jobs' eager rows agree within GPU time's own band.
    assert spread["compile eager"] < NOISE.gpu_min_effect < spread["ladder"]
