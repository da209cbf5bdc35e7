"""The cost section, the study's own cost, on real records of an H200 run (tests/fixtures/gpu/cost)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse.study_cost import PHASE_COLUMNS, job_table
from lmstudy.errors import UserError
from lmstudy.sections.cost import section as cost

RECORDS = Path(__file__).parent / "fixtures" / "gpu" / "cost"


@pytest.fixture(scope="module")
def jobs() -> pd.DataFrame:
    return job_table(sorted(RECORDS.rglob("*.tsv")), sorted(RECORDS.rglob("*.phases.json")))


def test_every_record_is_a_job_with_its_wall_time_and_phases(jobs):
    assert len(jobs) == 6
    fp32 = jobs.set_index("job").loc["2.7B_ctx1024_fp32_naive"]
    benchmark = pd.read_csv(RECORDS / "timing/time_model/2.7B_ctx1024_fp32_naive.tsv", sep="\t")
    phases = json.loads((RECORDS / "timing/time_model/2.7B_ctx1024_fp32_naive.phases.json").read_text())
    assert fp32["wall_s"] == benchmark["s"].iloc[0]
    assert fp32["measure_s"] == pytest.approx(phases["phases"]["measure"])
    assert fp32["other_s"] == pytest.approx(fp32["wall_s"] - sum(phases["phases"].values()))
    summary = jobs[jobs["rule"] == "memory_summary"].iloc[0]
    assert not summary["measuring"] and summary["other_s"] == summary["wall_s"]  # a CPU-side job
    assert set(jobs.loc[jobs["measuring"], "section"]) == {"timing", "compile", "memory"}


def test_phases_and_other_add_up_to_each_jobs_wall_time(jobs):
    total = jobs[[*PHASE_COLUMNS, "other_s"]].sum(axis=1)
    assert total.to_numpy() == pytest.approx(jobs["wall_s"].to_numpy())


def test_tables_and_findings_come_from_the_records(jobs):
    rules = cost.by_rule(jobs)
    shares = rules.filter(like=" %").drop(columns="share of run %")
    assert shares.sum(axis=1).to_numpy() == pytest.approx(100)
    assert rules["seconds"].sum() == pytest.approx(jobs["wall_s"].sum())
    assert list(cost.slowest(jobs, 2)["job"]) == list(jobs.nlargest(2, "wall_s")["job"])
    text = " ".join(cost.findings(jobs))
    timing = jobs[jobs["rule"] == "time_model"]
    assert f"Timing jobs spend {100 * timing['measure_s'].sum() / timing['wall_s'].sum():.0f}% of" in text
    assert f"The run's 6 jobs took {jobs['wall_s'].sum():.0f} s" in text
    slowest = jobs.loc[jobs["wall_s"].idxmax()]
    assert f"The slowest job is {slowest['rule']} {slowest['job']}" in text


def test_no_findings_without_time(jobs):
    assert cost.findings(jobs.assign(wall_s=0.0)) == []


def test_a_damaged_benchmark_is_named(tmp_path):
    bad = tmp_path / "timing" / "time_model" / "x.tsv"
    bad.parent.mkdir(parents=True)
    bad.write_text("h:m:s\n0:00:05\n")
    with pytest.raises(UserError, match="x.tsv is damaged or not a result file .not a Snakemake benchmark"):
        job_table([bad], [])


def test_a_run_without_gpu_leases_gets_no_gpu_wording(jobs):
    assert "GPU lease %" in cost.by_rule(jobs).columns  # the H200 run's records
    cpu = jobs.assign(gpu_chosen_by="none")  # what every measuring job of a CPU run records
    words = " ".join([*cost.by_rule(cpu).columns, *cost.slowest(cpu).columns, *cost.findings(cpu)])
    assert "job wrapper %" in words and "GPU lease" not in words


def test_the_repetition_cost_is_the_rounds_after_the_first_and_beyond_the_minimum():
    from lmstudy.analyse.study_cost import repetition_columns

    record = {"rounds_s": [3.0, 2.0, 1.5, 1.0], "min_processes": 2}
    assert repetition_columns(record) == {
        "rounds": 4, "noise_rounds": 2, "repeat_s": 4.5, "noise_repeat_s": 2.5}
    # A job measured once, or a record from before repetition, cost nothing extra.
    assert repetition_columns({"rounds_s": [3.0], "min_processes": 2}) == {
        "rounds": 1, "noise_rounds": 0, "repeat_s": 0.0, "noise_repeat_s": 0.0}
    assert repetition_columns(None) == {
        "rounds": 0, "noise_rounds": 0, "repeat_s": 0.0, "noise_repeat_s": 0.0}


def test_the_repetition_finding_splits_the_minimum_from_what_noise_asked_for():
    import pandas as pd

    from lmstudy.sections.cost.findings import repetition_findings

    frame = pd.DataFrame({
        "section": ["timing", "timing", "ladder", "report"],
        "wall_s": [40.0, 20.0, 30.0, 10.0],
        "rounds": [4, 2, 2, 0], "noise_rounds": [2, 0, 0, 0],
        "repeat_s": [24.0, 9.0, 12.0, 0.0], "noise_repeat_s": [15.0, 0.0, 0.0, 0.0],
    })
    first, where = repetition_findings(frame)
    # 45 s of 100: 30 s for the second process of each of three jobs, 15 s in two rounds of one job.
    assert first.startswith("Measuring in several fresh processes cost 45 s, 45% of the run: 30 s for")
    assert "15 s for the 2 extra rounds" in first and "in 1 of the 3 jobs that repeat" in first
    assert "about 0.9 min instead of 1.7 min" in first
    assert where == "The extra rounds went to timing (15 s)."
    # A run from before the repetition says nothing of it.
    before = frame.drop(columns=["rounds", "noise_rounds", "repeat_s", "noise_repeat_s"])
    assert repetition_findings(before) == []
