"""Snakemake reruns exactly what a change invalidates (dry-runs after a smoke run).

Each test works on a copy of the finished smoke run (results, logs,
.snakemake metadata, report, config.yaml; modification times kept), changes
one thing, and reads the jobs that `snakemake --dry-run` would run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, snakemake

# Rules that only gather, draw or render: never a measurement.
REPORT_SIDE = {"figures", "study_cost", "report", "all"}


@dataclass
class Job:
    rule: str
    wildcards: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)

    @property
    def measures(self) -> bool:
        """A job that measures: it asks for the GPU (DESIGN.md: every GPU job does)."""
        return self.resources.get("gpu") == "1"


def dry_run(workdir: Path, *args: str) -> list[Job]:
    out = snakemake(workdir, "--dry-run", *args).stdout
    jobs = []
    for line in out.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            jobs.append(Job(m.group(1)))
        elif jobs and (m := re.match(r"^\s+(wildcards|resources): (.*)$", line)):
            pairs = dict(item.split("=", 1) for item in m.group(2).split(", "))
            setattr(jobs[-1], m.group(1), pairs)
    if not jobs:
        assert "Nothing to be done" in out, out[-3000:]
    return jobs


def copy_run(smoke_run: Path, dest: Path) -> Path:
    """The finished smoke run, copied with its modification times."""
    shutil.copytree(smoke_run, dest, symlinks=True)
    return dest


def load_config(workdir: Path) -> dict:
    return yaml.safe_load((workdir / "config.yaml").read_text())


def save_config(workdir: Path, config: dict) -> None:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


SMOKE = ("--config", "preset=smoke")


@pytest.fixture
def finished(smoke_run, tmp_path) -> Path:
    return copy_run(smoke_run, tmp_path / "run")


def test_nothing_to_do_when_nothing_changed(finished):
    assert dry_run(finished, *SMOKE) == []


def test_an_added_context_length_runs_only_its_jobs_and_the_report(finished):
    config = load_config(finished)
    contexts = config["presets"]["smoke"]["timing"]["context_lengths"]
    first = str(contexts[0])
    contexts.append(48)
    save_config(finished, config)
    jobs = dry_run(finished, *SMOKE)

    measured = [j for j in jobs if j.measures]
    assert {j.rule for j in measured} == {"time_model"}
    assert {j.wildcards["ctx"] for j in measured} == {"48"}
    # one job per configuration the run measured at each context length
    existing = {
        m.group(1, 3, 4)
        for p in (finished / "results/default/timing/raw").glob("*.csv")
        if (m := re.fullmatch(r"(.+)_ctx(\d+)_(fp32|bf16|fp16)_(.+)\.csv", p.name)) and m.group(2) == first
    }
    new = [(j.wildcards["size"], j.wildcards["precision"], j.wildcards["variant"]) for j in measured]
    assert sorted(new) == sorted(existing)
    others = {j.rule for j in jobs if not j.measures}
    assert others <= {"aggregate_timing"} | REPORT_SIDE, others
    assert {"aggregate_timing", "report"} <= others


def test_a_changed_size_reruns_only_that_sizes_jobs(finished):
    config = load_config(finished)
    config["presets"]["smoke"]["sizes"]["tiny"]["d_ff"] = 128
    save_config(finished, config)
    jobs = dry_run(finished, *SMOKE)

    measured = [j for j in jobs if j.measures]
    assert measured, "changing tiny's d_ff reran no measurement"
    # every measurement of `tiny` reruns, and nothing else is measured again: the precision job too,
    # which observes the dtypes of the smallest size under autocast (its spec names tiny, no wildcard)
    assert all(j.wildcards.get("size") == "tiny" or j.rule == "precision_experiments" for j in measured), [
        (j.rule, j.wildcards) for j in measured if j.wildcards.get("size") != "tiny"
    ]
    assert "precision_experiments" in {j.rule for j in measured}
    tiny_timings = list((finished / "results/default/timing/raw").glob("tiny_*.csv"))
    assert len([j for j in measured if j.rule == "time_model"]) == len(tiny_timings)
    assert "report" in {j.rule for j in jobs}


def test_a_setting_changed_to_another_settings_value_is_seen(finished):
    """Snakemake compares params as a set of values: a change of one setting to
    a value another setting of the job already has must rerun the job all the same."""
    config = load_config(finished)
    smoke = config["presets"]["smoke"]
    # The batch size is another value of the same job's params.
    assert smoke["nsys"]["profiled_steps"] != smoke["batch_size"]
    smoke["nsys"]["profiled_steps"] = smoke["batch_size"]
    save_config(finished, config)
    jobs = dry_run(finished, *SMOKE)

    measured = [j for j in jobs if j.measures]
    assert {j.rule for j in measured} == {"profile_model"}
    # One job per size x context profiles every pass into one profile folder.
    profiled = list((finished / "results/default/nsys/raw").glob("*/profile"))
    assert len(measured) == len(profiled)


def _ladder_edit(finished: Path, **settings) -> list[Job]:
    """Change the smoke preset's ladder settings; the jobs a dry-run would then run."""
    config = load_config(finished)
    config["presets"]["smoke"]["ladder"].update(settings)
    save_config(finished, config)
    return dry_run(finished, *SMOKE)


def test_a_changed_ladder_step_count_reruns_every_rung_and_nothing_else_measured(finished):
    jobs = _ladder_edit(finished, timed_steps=4)
    measured = [j for j in jobs if j.measures]
    assert {j.rule for j in measured} == {"ladder_rung"}  # no other section
    assert len(measured) == len(list((finished / "results/default/ladder/raw").glob("*.csv")))
    assert {j.rule for j in jobs if not j.measures} <= {"aggregate_ladder"} | REPORT_SIDE
    assert {"aggregate_ladder", "report"} <= {j.rule for j in jobs}


def test_an_added_rung_runs_only_its_jobs(finished):
    rungs = load_config(finished)["presets"]["smoke"]["ladder"]["rungs"]
    jobs = _ladder_edit(finished, rungs=[*rungs[:2], "bf16-sdpa-compile-fused", *rungs[2:]])
    measured = [j for j in jobs if j.measures]
    assert sorted((j.rule, j.wildcards["size"], j.wildcards["rung"]) for j in measured) == [
        ("ladder_rung", size, "bf16-sdpa-compile-fused") for size in ("oversized", "tiny")]
    assert {j.rule for j in jobs if not j.measures} <= {"aggregate_ladder"} | REPORT_SIDE


def test_a_changed_matmul_ceiling_reruns_the_rung_jobs_that_measure_it_and_nothing_else(finished):
    # Each rung job measures its own GPU's ceiling: a changed measurement reruns them, no other section.
    jobs = _ladder_edit(finished, matmul={"n": [64], "warmup_s": 0, "bursts": 3, "burst_products": 2})
    assert {j.rule for j in jobs if j.measures} == {"ladder_rung"}
    assert {j.rule for j in jobs if not j.measures} <= {"aggregate_ladder"} | REPORT_SIDE


@pytest.fixture
def repo_copy(smoke_run, tmp_path) -> tuple[Path, Path]:
    """A copy of this working tree and of the finished run, to edit templates in.

    The copy's templates and figure style have new absolute paths, which
    Snakemake's `input` rerun trigger would count as changed inputs; the
    dry-runs therefore use the other triggers (modification time, params,
    code, software environment), and check first that these find nothing.
    """
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    repo = tmp_path / "repo"
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / name)
    run = copy_run(smoke_run, tmp_path / "run")
    return repo, run


def dry_run_in_copy(repo: Path, run: Path) -> list[Job]:
    return dry_run(
        run, "-s", str(repo / "Snakefile"), "--rerun-triggers", "mtime", "params", "code",
        "software-env", *SMOKE,
    )


@pytest.mark.parametrize("edited", ["workflow/templates/report.html.j2", "workflow/report/figures.mplstyle"])
def test_editing_the_report_side_reruns_no_measurement(repo_copy, edited):
    repo, run = repo_copy
    assert dry_run_in_copy(repo, run) == []

    path = repo / edited
    path.write_text(path.read_text() + "\n")  # an edit, now: newer than every result
    jobs = dry_run_in_copy(repo, run)

    assert jobs, f"editing {edited} reran nothing"
    assert not [j.rule for j in jobs if j.measures]
    assert {j.rule for j in jobs} <= REPORT_SIDE
    assert "report" in {j.rule for j in jobs}
    if edited.endswith(".mplstyle"):
        figures = {j.wildcards["section"] for j in jobs if j.rule == "figures"}
        assert figures == {p.name for p in (run / "results/default/figures").iterdir()}
    else:
        assert "figures" not in {j.rule for j in jobs}


# Issue 23, item 5: editing the code a job runs reruns that job's results, and only those.
def edit(repo: Path, module: str, text: str) -> None:
    path = repo / module
    path.write_text(path.read_text() + text)


def test_editing_measuring_code_reruns_its_measurements_and_what_reads_them(repo_copy):
    repo, run = repo_copy
    edit(repo, "lmstudy/measure/timing.py", "\n_EDITED = 1\n")
    jobs = dry_run_in_copy(repo, run)
    rules = {j.rule for j in jobs}
    # time_model, compile_model, ladder_rung and matmul_reference run lmstudy.measure.timing
    assert {"time_model", "aggregate_timing", "report"} <= rules
    assert not rules & {"attention_sweep", "memory_snapshot", "precision_experiments", "nsys_backend"}
    changed = snakemake(run, "-s", str(repo / "Snakefile"), "--list-changes", "params", *SMOKE).stdout
    assert "results/default/timing/raw/tiny_ctx32_fp32_naive.csv" in changed


def test_editing_analysing_code_reruns_tables_and_report_never_a_measurement(repo_copy):
    repo, run = repo_copy
    edit(repo, "lmstudy/analyse/memory/summary.py", "\n_EDITED = 1\n")
    jobs = dry_run_in_copy(repo, run)
    rules = {j.rule for j in jobs}
    # (The smoke preset has no snapshot to summarize on a CPU: memory_table reads summary.py too.)
    assert {"memory_table", "report"} <= rules
    assert not [j.rule for j in jobs if j.measures]
    assert "aggregate_timing" not in rules


@pytest.mark.parametrize(("module", "text"), [
    ("lmstudy/measure/timing.py", "\n# a comment, and blank lines\n\n\n"),
    ("lmstudy/slurm_limits.py", "\n_EDITED = 1\n"),  # code no job runs (the submit host's check)
    ("lmstudy/launch/job_server.py", "\n_EDITED = 1\n"),  # the launcher: it starts jobs, makes no result
])
def test_a_comment_or_an_unrelated_module_reruns_nothing(repo_copy, module, text):
    repo, run = repo_copy
    edit(repo, module, text)
    assert dry_run_in_copy(repo, run) == []


# Issue 33: a section's report code, its jobs' runners and the registry, each its own code.
def test_a_sections_report_code_reruns_no_measurement(repo_copy):
    repo, run = repo_copy
    edit(repo, "lmstudy/sections/attention/section.py", "\n_EDITED = 1\n")
    jobs = dry_run_in_copy(repo, run)
    assert "report" in {j.rule for j in jobs}
    assert not [j.rule for j in jobs if j.measures]


def test_a_sections_runner_reruns_only_its_own_measurements(repo_copy):
    repo, run = repo_copy
    edit(repo, "lmstudy/sections/attention/jobs.py", "\n_EDITED = 1\n")
    measured = {j.rule for j in dry_run_in_copy(repo, run) if j.measures}
    assert measured == {"attention_sweep"}


def test_the_registry_itself_reruns_nothing(repo_copy):
    """What the registry gathers reaches a job through its spec param and its runner's code."""
    repo, run = repo_copy
    edit(repo, "lmstudy/registry.py", "\n_EDITED = 1\n")
    assert dry_run_in_copy(repo, run) == []


# Issue 41: a section's result-file checks are the code of the rules that read the files.
def test_editing_a_result_file_check_reruns_the_aggregation_and_no_measurement(repo_copy):
    repo, run = repo_copy
    products = repo / "lmstudy/sections/timing/products.py"
    text = products.read_text()
    assert "1e-6 * expected.abs()" in text
    products.write_text(text.replace("1e-6 * expected.abs()", "2e-6 * expected.abs()"))
    jobs = dry_run_in_copy(repo, run)
    rules = {j.rule for j in jobs}
    assert {"aggregate_timing", "report"} <= rules, rules
    assert not [j.rule for j in jobs if j.measures]
