"""Section 7 in the smoke run: a job per size and rung (each with its GPU's matmul ceiling), the joined
table, the report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from lmstudy import registry
from lmstudy.measure.ladder_bench import BenchSpec, measure_rung

from .specs import spec_for
from .test_workflow_smoke import smoke_config

RESULTS = "results/default/ladder"
GRAPHS = "bf16-sdpa-cudagraphs-master"  # the smoke preset's rung that a CPU cannot run


def _spec(size: str, rung: str) -> BenchSpec:
    """The spec the smoke run's ladder_rung job of (size, rung) measured: from the same config, by the
    same function (lmstudy.job_spec, through tests/specs.py)."""
    return spec_for("ladder", size=size, rung=rung, context_length=smoke_config()["ladder"]["context_length"])


def test_every_size_and_rung_is_a_job_and_a_row_joined_with_its_own_matmul_ceiling(smoke_run: Path):
    ladder = smoke_config()["ladder"]
    expected = [(size, rung) for size in ladder["sizes"] for rung in ladder["rungs"]]
    raws = sorted(p.name for p in (smoke_run / RESULTS / "raw").glob("*.csv"))
    assert raws == sorted(f"{s}_ctx{ladder['context_length']}_{r}.csv" for s, r in expected)
    table = pd.read_csv(smoke_run / RESULTS / "ladder.csv")
    assert list(zip(table["size"], table["rung_key"], strict=True)) == expected  # the config's order
    # Every rung job, OOM and unsupported ones too, measured the ceiling of its own device after its rung.
    matmul = pd.read_csv(smoke_run / RESULTS / "matmul.csv")
    spec = ladder["matmul"]
    per_job = matmul.groupby(["size", "rung_key"])
    assert sorted(per_job.groups) == sorted(expected)
    # Sustained bursts until the rate stopped rising (at least `bursts`, at most MAX_BURSTS_FACTOR
    # times as many per size), then `bursts` short ones.
    from lmstudy.measure.matmul_ceiling import MAX_BURSTS_FACTOR

    kinds = matmul.groupby(["size", "rung_key", "kind"]).size().unstack()
    sizes = len(spec["n"])
    assert (kinds["short"] == sizes * spec["bursts"]).all()
    least = sizes * spec["bursts"]
    assert kinds["sustained"].between(least, least * MAX_BURSTS_FACTOR).all()
    assert (matmul.loc[matmul["kind"] == "sustained", "products"] == spec["burst_products"]).all()
    assert (matmul.loc[matmul["kind"] == "short", "products"] == 1).all()
    # Each rung's ceiling is its own job's sustained rate: the median of the steady window's bursts.
    steady = matmul[(matmul["kind"] == "sustained") & matmul["steady"].astype(str).eq("True")]
    ceiling = steady.groupby(["size", "rung_key"])["tflops"].median()
    own = [ceiling[(s, r)] for s, r in zip(table["size"], table["rung_key"], strict=True)]
    assert table["matmul_tflops"].to_numpy() == pytest.approx(own)
    ok = table[table["status"] == "ok"]
    assert set(ok["size"]) == {"tiny"} and len(ok) == len(ladder["rungs"]) - 1
    assert ok["share_of_matmul"].to_numpy() == pytest.approx(ok["achieved_tflops"] / ok["matmul_tflops"])
    assert set(table.loc[(table["size"] == "oversized") & (table["rung_key"] != GRAPHS), "status"]) == {"OOM"}


def test_a_rung_the_cpu_cannot_run_is_unsupported_and_the_report_says_why(smoke_run: Path):
    table = pd.read_csv(smoke_run / RESULTS / "ladder.csv")
    graphs = table[table["rung_key"] == GRAPHS]
    assert set(graphs["status"]) == {"unsupported"}
    reason = graphs["reason"].iloc[0]
    assert reason == ("CUDA graphs (torch.compile mode reduce-overhead) need a CUDA device, and this run is "
                      "on cpu.")
    md = (smoke_run / "report/default/report.md").read_text()
    section = md.split("## 7\\. The optimization ladder of the training step")[1].split("\n## ")[0]
    assert f"Could not run here: {graphs['rung'].iloc[0]} (tiny, oversized): {reason}" in section
    assert re.search(r"^\| tiny \| bf16 \+ SDPA \+ compile with CUDA graphs .* \| unsupported \|", section,
                     re.M)
    html = (smoke_run / "report/default/index.html").read_text()
    assert re.search(r'<td class="[^"]*\bunsupported\b[^"]*" >unsupported</td>', html)
    # OOM stays OOM, and a rung that ran is neither
    assert re.search(r"^\| oversized \| fp32 \| fp32 \| OOM \|", section, re.M)  # rung, precision, status
    assert "Out of memory: oversized fp32, oversized bf16," in section


def test_the_report_has_the_ladder_section_with_its_tables_and_figures(smoke_run: Path):
    md = (smoke_run / "report/default/report.md").read_text()
    titles = re.findall(r"^## (\d+)\\\. ", md, re.M)
    assert titles == [str(n) for n in range(1, len(registry.NAMES) + 1)]
    section = md.split("## 7\\. The optimization ladder of the training step")[1].split("\n## ")[0]
    assert re.search(r"^- tiny: the best rung is .* of the dense bf16 matmul ceiling measured on its "
                     r"(CPU|GPU)",
                     section, re.M)
    assert re.search(r"^- Measured dense bf16 matmul ceiling, sustained: ", section, re.M)
    assert "on a CPU, torch.profiler records CPU operators, not GPU kernels" in section
    report = smoke_run / "report/default"
    for name in ("ladder_rungs", "ladder_best", "ladder_matmul", "ladder_time_by_category"):
        assert f"(tables/{name}.csv)" in section and (report / "tables" / f"{name}.csv").exists(), name
    for name in ("share_of_matmul", "time_by_category"):
        assert (report / "figures" / f"ladder_{name}.png").stat().st_size > 5000, name
    categories = pd.read_csv(report / "tables/ladder_time_by_category.csv")
    assert (categories["GEMM (ms)"] > 0).all()


def test_each_ladder_job_is_counted_in_the_studys_cost(smoke_run: Path):
    jobs = pd.read_csv(smoke_run / "results/default/cost/jobs.csv")
    ladder = jobs[jobs["section"] == "ladder"]
    measuring = ladder[ladder["measuring"]]
    config = smoke_config()["ladder"]
    assert sorted(measuring["rule"].value_counts().items()) == [
        ("ladder_rung", len(config["sizes"]) * len(config["rungs"]))]
    records = smoke_run / "results/default/benchmarks/ladder/ladder_rung"
    record = json.loads(next(records.glob("tiny_ctx*_fp32.phases.json")).read_text())
    assert {"start", "build", "measure", "profile"} <= set(record["phases"])
    assert {"aggregate_ladder", "figures"} <= set(ladder["rule"])


@pytest.mark.parametrize("rung", ["fp32", GRAPHS])
def test_the_pipeline_measures_what_the_benchmark_measures(smoke_run: Path, rung):
    """The rung job's row has exactly the columns of lmstudy.measure.ladder_bench.measure_rung's row
    for the same spec: scripts/bench_ladder.py (which calls it) and the workflow measure the same thing."""
    spec = _spec("tiny", rung)
    job = pd.read_csv(smoke_run / RESULTS / "raw" / f"tiny_ctx{spec.context_length}_{rung}.csv")
    row = measure_rung(spec)
    # The job measures in fresh processes until they agree (lmstudy.measure.repeat): the same row, with
    # the median over processes, its interval and their number and spread beside it.
    assert [c for c in job.columns if c in row] == list(row)
    # ... and each process's GPU time and kernels, for the comparison of two runs (empty on a CPU).
    assert set(job.columns) - set(row) <= {"processes", "ci_low_ms", "ci_high_ms", "process_spread",
                                           "gpu_busy_ms_processes", "kernels_per_step_processes"}
    assert job["status"].iloc[0] == row["status"]
    for column in ("rung", "d_model", "context_length", "batch_size", "timed_steps", "profile_steps",
                   "flops_per_step"):
        assert job[column].iloc[0] == row[column], column
