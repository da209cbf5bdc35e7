"""Issue 40: a report of a CPU run makes no GPU claim: what a profiler reads on a CPU is its operators'
time, not a GPU's busy time, so no row is host-bound there, no column or finding speaks of GPU time, and
no CPU operator is called memory-bound. The same rows labelled as a GPU's still say all of it."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.trust import flag_rows
from lmstudy.sections.ladder.findings import findings as ladder_findings
from lmstudy.sections.ladder.tables import ladder_frame, ladder_table
from lmstudy.sections.nsys.answers import attention_answer

from .conftest import FIXTURES

RUN = FIXTURES / "cpu_run"
GPU = "NVIDIA H100 80GB HBM3"
GPU_COLUMNS = {"GPU busy ms", "GPU-time speed-up vs rung below ×", "GPU-time speed-up vs fp32 ×"}


def _ladder(gpu: str | None = None) -> pd.DataFrame:
    rows = pd.read_csv(RUN / "ladder/ladder.csv").drop(columns=["host_bound", "noisy"], errors="ignore")
    if gpu:
        rows = rows.assign(gpu=gpu)
    return ladder_frame(flag_rows(rows, min_gpu_busy=0.85, max_spread=0.05))


def test_no_row_measured_on_a_cpu_is_host_bound():
    assert not _ladder()["host_bound"].any()
    assert _ladder(GPU)["host_bound"].any()  # the same busy times on a GPU: host-bound there


def test_the_ladder_of_a_cpu_run_has_no_gpu_time_columns_nor_gpu_ratios():
    assert not GPU_COLUMNS & set(ladder_table(_ladder()).columns)
    assert not any("GPU" in finding or "†" in finding for finding in ladder_findings(_ladder()))
    assert GPU_COLUMNS <= set(ladder_table(_ladder(GPU)).columns)
    assert any("(on the GPU " in finding for finding in ladder_findings(_ladder(GPU)))


def test_a_cpu_softmax_is_not_called_memory_bound():
    kernels = pd.read_csv(RUN / "nsys/kernels.csv")
    assert "memory-bound" not in attention_answer(kernels).text
    assert "(memory-bound)" in attention_answer(kernels.assign(gpu=GPU)).text
