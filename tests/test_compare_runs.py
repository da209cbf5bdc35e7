"""The header of a comparison: what differs, and which differences make it unfair.

(lmstudy.analyse.compare.runs)
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse.compare import runs as R
from lmstudy.report.compare import compared_products
from lmstudy.sections.contracts import contracts
from lmstudy.sections.ladder.compare import ladder_rows
from lmstudy.sections.timing.compare import timing

from .conftest import REPO

MIN_EFFECT = 0.03  # the band these tests' verdicts are worked out for (config.yaml ships the same)


def run(name: str, tf32: bool = False, d_model: int = 768, status: str = "ok") -> R.Run:
    row = {
        "size": "small", "context_length": 128, "pass": "train_step", "precision": "fp32", "variant": "naive",
        "warmup_steps": 5, "timed_steps": 10, "batch_size": 4, "vocab_size": 10000, "d_model": d_model,
        "d_ff": 3072, "num_layers": 12, "num_heads": 12, "params": 1, "status": status,
        "median_ms": 10.0 if status == "ok" else None,
        "step_times_ms": "[10.0, 10.1, 9.9, 10.0, 10.05]" if status == "ok" else None,
        "gpu": "NVIDIA H100", "tf32_matmul": tf32, "tf32_cudnn": tf32,
    }
    tables = {key: pd.DataFrame() for key in compared_products(contracts())}
    tables["timing"] = pd.DataFrame([row])
    return R.Run(name, Path(name), tables)


def test_tf32_and_a_same_named_size_with_other_dimensions_are_warned_of():
    warnings = R.warnings(run("a"), run("b", tf32=True, d_model=1024))
    assert any(w.startswith("TF32 for fp32 matrix products differs (A: False, B: True)") for w in warnings)
    assert any(w.startswith("Size small has other dimensions in each run (A: d_model 768") for w in warnings)
    assert R.warnings(run("a"), run("b")) == []


def test_the_environment_table_marks_what_differs():
    table = R.environment_table(run("a"), run("b", tf32=True)).set_index("setting")
    assert table.loc["tf32_matmul", "A vs B"] == "differs" and table.loc["gpu", "A vs B"] == "same"
    assert all(str(c).strip() for c in table.reset_index().columns)  # no empty header


def test_a_run_with_one_process_per_configuration_claims_nothing():
    rows = timing(run("a"), run("b"), MIN_EFFECT)  # flat step lists: runs made before repetition
    assert list(rows["verdict"]) == ["one process"]


def test_a_configuration_out_of_memory_in_one_run_is_a_row_that_says_so():
    rows = timing(run("a"), run("b", status="OOM"), MIN_EFFECT, unfair_sizes=frozenset({"small"}))
    assert list(rows["verdict"]) == ["OOM in B"] and list(rows["note"]) == ["other dimensions"]


@pytest.mark.parametrize(("status_a", "status_b", "said"), [
    ("ok", "OOM", "ran out of memory in B only."),
    ("OOM", "ok", "ran out of memory in A only."),
    ("error", "OOM", None),  # neither run measured it: not an out-of-memory in one run only
])
def test_an_out_of_memory_in_one_run_only_is_said_of_that_run(status_a, status_b, said):
    from lmstudy.sections.timing.compare import _out_of_memory_in_one

    rows = timing(run("a", status=status_a), run("b", status=status_b), MIN_EFFECT)
    texts = [str(f) for f in _out_of_memory_in_one(rows)]
    assert texts == ([] if said is None else [texts[0]]) and (said is None or texts[0].endswith(said)), texts


def _with_ladder(run_: R.Run, samples: dict[str, list[float] | str]) -> R.Run:
    """`run_` with a ladder table (section 7): rung key -> its step samples (ms), or a status."""
    rows = []
    for key, steps in samples.items():
        ok = not isinstance(steps, str)
        median = sorted(steps)[len(steps) // 2] if ok else None
        rows.append({"size": "small", "context_length": 1024, "rung_key": key, "rung": key,
                     "status": "ok" if ok else steps, "median_ms": median,
                     # two fresh processes of the rung, 0.1% apart
                     "step_times_ms": str([steps, [t * 1.001 for t in steps]]) if ok else None,
                     "share_of_matmul": 0.5 if ok else None,
                     "matmul_tflops": 700.0})
    run_.tables["ladder"] = pd.DataFrame(rows)
    return run_


def test_the_ladders_rungs_are_compared_from_their_step_samples():
    fast = [10.0, 10.1, 9.9, 10.0, 10.05, 10.02]
    a = _with_ladder(run("a"), {"fp32": fast, "bf16": fast, "bf16-sdpa-cudagraphs-master": "unsupported"})
    b = _with_ladder(run("b"), {"fp32": fast, "bf16": [2 * t for t in fast],
                                "bf16-sdpa-cudagraphs-master": [5.0] * 6})
    rows = ladder_rows(a, b, MIN_EFFECT).set_index("rung_key")
    assert rows.loc["fp32", "verdict"] == "same"
    assert rows.loc["bf16", "verdict"] == "slower"
    assert rows.loc["bf16", "ratio"] == pytest.approx(2.0, rel=1e-3)
    assert rows.loc["bf16", "processes_a"] == 2
    assert rows.loc["bf16-sdpa-cudagraphs-master", "verdict"] == "unsupported in A"
    assert rows.loc["bf16", "share_a"] == 0.5


def _with_profiles(run_: R.Run, kernels: bool) -> R.Run:
    key = {"size": "small", "context_length": 128, "pass": "forward", "precision": "fp32"}
    run_.tables["profiles"] = pd.DataFrame([{**key, "status": "ok"}])
    if kernels:
        run_.tables["kernels"] = pd.DataFrame([{
            **key, "status": "ok", "kernel": "sm90_gemm", "category": "GEMM", "total_ns": 2e6,
            "profiled_steps": 2,
        }])
    return run_


@pytest.mark.parametrize("a_has, b_has", [(False, True), (True, False), (False, False)])
def test_profiles_without_a_kernel_table_are_not_in_this_run_not_a_division_by_zero(tmp_path, a_has, b_has):
    from lmstudy.report.contract import ComparedRuns
    from lmstudy.sections.nsys import compare as nsys_compare

    a, b = _with_profiles(run("a"), a_has), _with_profiles(run("b"), b_has)
    assert nsys_compare.kernel_categories(a, b).empty
    built = nsys_compare.section(ComparedRuns(a, b, 0.03, tmp_path))
    text = " ".join(str(getattr(block, "text", "")) for block in built.blocks)
    missing = [side for side, has in (("A", a_has), ("B", b_has)) if not has]
    assert "not in this run for " + " and ".join(f"{s} ({s.lower()})" for s in missing) in text
    assert "nsys/kernels.csv" in text


def _timing_on_disk(results: Path, name: str, **cells) -> Path:
    """results/<name>/timing/timing.csv with one measured row, written raw as a copied run may be."""
    steps = [10.0, 10.1, 9.9, 10.0, 10.05]
    row = {
        "size": "tiny", "context_length": 64, "pass": "train_step", "precision": "fp32", "variant": "naive",
        "warmup_steps": 2, "timed_steps": 5, "batch_size": 2, "params": 100, "status": "ok",
        "mean_ms": 10.0, "median_ms": 10.0, "min_ms": 9.9, "max_ms": 10.1, "tokens_per_s": 2 * 64 / 0.010,
        "step_times_ms": json.dumps([steps, steps]), "gpu": "cpu", **cells,
    }
    path = results / name / "timing" / "timing.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame([row]).to_csv(path, index=False)
    return path


# Issue 32, item 1: the comparison's own CSVs go through the one writer, which neutralises formulas.
def test_a_formula_in_a_copied_runs_environment_reaches_no_comparison_csv(tmp_path):
    from lmstudy.report.compare import render_comparison

    formula = '=HYPERLINK("http://evil/","x")'
    _timing_on_disk(tmp_path / "results", "a")
    _timing_on_disk(tmp_path / "results", "b", gpu=formula)
    out = tmp_path / "report"
    render_comparison(contracts(), tmp_path / "results", "a", "b", REPO / "workflow/templates", out,
                      MIN_EFFECT)
    cells = pd.read_csv(out / "tables/environments.csv", dtype=str).to_numpy().ravel().tolist()
    assert "'" + formula in cells and formula not in cells
    for table in out.glob("tables/*.csv"):
        text = pd.read_csv(table, dtype=str, keep_default_na=False).to_numpy().ravel().tolist()
        assert not any(str(c).startswith(("=", "+", "@")) for c in text), table


def test_every_csv_the_project_writes_goes_through_the_one_writer():
    import re

    writers = re.compile(r"\.to_csv\(|csv\.writer\(|csv\.DictWriter\(")
    sources = [*REPO.glob("lmstudy/**/*.py"), *REPO.glob("scripts/*.py"), *REPO.glob("tools/*.py"),
               *REPO.glob("workflow/**/*.smk"), REPO / "Snakefile"]
    found = [str(p.relative_to(REPO)) for p in sources if writers.search(p.read_text())]
    assert found == ["lmstudy/atomic.py"]


# Issue 32, item 2: a damaged samples cell is named with its file, and nothing is shown from it.
def test_a_step_samples_cell_that_is_not_json_is_named_as_damaged(tmp_path):
    from lmstudy.errors import UserError
    from lmstudy.report.compare import render_comparison

    _timing_on_disk(tmp_path / "results", "a")
    path = _timing_on_disk(tmp_path / "results", "b", step_times_ms="[[10.0, 10.1], [9.9")
    out = tmp_path / "report"
    with pytest.raises(UserError) as raised:
        render_comparison(contracts(), tmp_path / "results", "a", "b", REPO / "workflow/templates", out,
                      MIN_EFFECT)
    message = str(raised.value)
    assert f"{path} is damaged" in message and "row 2 has '[[10.0, 10.1], [9.9' for step_times_ms" in message
    assert "\n" not in message and not (out / "index.html").exists()


def test_the_timing_comparison_describes_only_the_columns_it_has(tmp_path):
    from lmstudy.report.render import Table, Text
    from lmstudy.sections.timing.compare import _section_timing

    rows = timing(run("a"), run("b"), MIN_EFFECT)
    section = _section_timing(rows, MIN_EFFECT, tmp_path, 0.015)
    intro = next(b for b in section.blocks if isinstance(b, Text)).text
    columns = [c for b in section.blocks if isinstance(b, Table) for c in b.frame.columns]
    assert "p is the test" not in intro and "p" not in columns
    assert "Verdicts come from the variation between fresh processes" in intro


def _gpu_run(name: str, work: float, seed: int) -> R.Run:
    """A run made after issue 30: 12 host-bound timing rows, each with every process's GPU time and
    kernel count beside its steps (wall time in two humps 1.7x apart, GPU time within 0.2%)."""
    import json

    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for context in (128, 256, 512, 1024):
        for pass_name in ("forward", "forward_backward", "train_step"):
            levels = 10.0 * 1.7 ** rng.integers(0, 2, 3)
            steps = [list(level * np.exp(rng.normal(0, 0.01, 5))) for level in levels]
            gpu = list(2.0 * work * context / 1024 * np.exp(rng.normal(0, 0.002, 3)))
            rows.append({**run(name).tables["timing"].iloc[0].to_dict(), "context_length": context,
                         "pass": pass_name, "median_ms": float(np.median([np.median(s) for s in steps])),
                         "step_times_ms": json.dumps(steps), "gpu_busy_ms": float(np.median(gpu)),
                         "gpu_busy_ms_processes": json.dumps(gpu), "kernels_per_step": 300,
                         "kernels_per_step_processes": json.dumps([300] * 3)})
    made = run(name)
    made.tables["timing"] = pd.DataFrame(rows)
    return made


def test_the_timing_comparison_shows_gpu_time_and_kernels_beside_wall_time_and_reads_each_row():
    from lmstudy.analyse.compare import verdict as V
    from lmstudy.sections.timing.compare import timing_findings, timing_table

    rows = timing(_gpu_run("a", 1.0, 1), _gpu_run("b", 10 / 9, 2), MIN_EFFECT)
    table = timing_table(rows, variant_column=False)
    assert {"flags A/B", "A GPU ms", "GPU B/A", "GPU verdict", "kernels per step A/B", "kernels",
            "reading"} <= set(table.columns)
    assert set(table["GPU verdict"]) == {V.SLOWER} and set(table["kernels"]) == {V.EQUAL}
    assert table["flags A/B"].str.startswith("†").all()  # the GPU busy for 20% of a step at most
    assert table["reading"].str.startswith("GPU time slower, host time ").all()
    # The findings count each measure, and state no wall-time ratio where none decided.
    said = timing_findings(rows, MIN_EFFECT, 0.015)
    forward = next(f for f in said if f.startswith("forward,"))
    assert "GPU time 4 slower (median B/A 1.11" in forward
    assert forward.startswith("forward, 4 configurations: wall time 4 undecided (no ratio stated); ")
    assert forward.data["gpu_verdict"].eq(V.SLOWER).all()


def _drifting_run(name: str, work: float, seed: int, drift: float = 0.35) -> R.Run:
    """18 CPU timing rows, each side one job of 2 processes that agree within 1%, each job's level moved
    as a whole by the machine's load (log-normal, sd `drift`): what the smoke A/A showed on 2 cores."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for context in (32, 64):
        for pass_name, base in (("forward", 2.0), ("forward_backward", 6.0), ("train_step", 8.0)):
            for precision in ("fp32", "bf16", "fp16"):
                level = base * work * float(np.exp(rng.normal(0, drift)))
                steps = [list(level * np.exp(rng.normal(0, 0.005, 5))) for _ in range(2)]
                rows.append({**run(name).tables["timing"].iloc[0].to_dict(), "context_length": context,
                             "pass": pass_name, "precision": precision, "gpu": "cpu (x86_64)",
                             "median_ms": level, "step_times_ms": json.dumps(steps)})
    made = run(name)
    made.tables["timing"] = pd.DataFrame(rows)
    return made


def test_a_drift_between_jobs_is_no_change_and_a_change_of_every_row_still_is():
    """Each side of a row is one job: its processes agree, but the job as a whole moved with the
    machine's load. The rows' scatter around their common change bounds every row's interval
    (tables._between_jobs), so the A/A calls nothing, and twice the work of every row is still seen."""
    from lmstudy.analyse.compare import verdict as V

    same = timing(_drifting_run("a", 1.0, 1), _drifting_run("b", 1.0, 2), MIN_EFFECT)
    assert same["verdict"].isin([V.FASTER, V.SLOWER]).mean() <= 0.1, same[["pass", "ratio", "verdict"]]
    # A 10% drift a job, both sides: twice the work still shows in (nearly) every row.
    double = timing(_drifting_run("a", 1.0, 1, drift=0.1), _drifting_run("b", 2.0, 2, drift=0.1), MIN_EFFECT)
    assert (double["verdict"] == V.SLOWER).mean() >= 0.8, double[["pass", "ratio", "verdict"]]
