"""Issue 40: the workflow says a user's mistake in one sentence before it works for minutes: a
comparison of a run no config could name, a plan far beyond the study's, --report into a folder that
does not exist or onto a folder, a read-only folder the jobs write. Dry runs: nothing is measured."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from lmstudy import config as study_config

from .conftest import REPO, SNAKEMAKE, new_workdir, snakemake

# Every test here starts Snakemake (a dry run, a lint, a refused config).
pytestmark = pytest.mark.workflow


@pytest.mark.parametrize(("run", "said"), [
    ("..", "report/compare/<A>_vs_<B>: the run: '..' would put results outside results/"),
    ("-x", "report/compare/<A>_vs_<B>: the run: '-x' starts with '-'"),
])
def test_a_comparison_of_a_run_no_config_could_name_is_refused(tmp_path, run, said):
    workdir = new_workdir(tmp_path / "w")
    (workdir / "results/b").mkdir(parents=True)
    done = snakemake(workdir, "-n", f"report/compare/{run}_vs_b/index.html", check=False)
    assert done.returncode != 0
    assert said in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    assert "--config run=" not in done.stdout + done.stderr


def test_a_plan_of_very_many_jobs_is_said_before_the_dag_is_built(tmp_path):
    workdir = new_workdir(tmp_path / "w")
    many = workdir / "many.yaml"
    many.write_text(yaml.safe_dump({"timing": {"context_lengths": list(range(1, study_config.MANY_JOBS))}}))
    command = [*SNAKEMAKE, "-d", str(workdir), "-n", "--configfile", "config.yaml", str(many),
               "--config", "preset=smoke"]
    with subprocess.Popen(command, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            first = ("warning:", "Building DAG")
            said = next((line for line in process.stderr if line.startswith(first)), "")
        finally:
            process.kill()
    assert said.startswith("warning: this config plans ") and "far more than the study needs" in said, said
    assert "timing " in said


def test_a_plan_of_the_studys_size_says_nothing():
    records = [f"results/r/benchmarks/timing/time_model/{i}.tsv" for i in range(study_config.MANY_JOBS)]
    assert study_config.many_jobs_warning(records, "results/r/benchmarks") is None
    said = study_config.many_jobs_warning([*records, records[0]], "results/r/benchmarks")
    assert said.startswith(f"this config plans {study_config.MANY_JOBS + 1:,} jobs (timing ")


@pytest.mark.parametrize(("target", "said"), [
    ("nodir/report.html", "snakemake --report: the folder nodir of nodir/report.html does not exist"),
    ("afolder", "snakemake --report: afolder is a folder: give the path of the file to write."),
])
def test_a_report_snakemake_cannot_write_is_said_first(tmp_path, target, said):
    workdir = new_workdir(tmp_path / "w")
    (workdir / "afolder").mkdir()
    done = snakemake(workdir, "--report", target, check=False)
    assert done.returncode != 0 and said in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    assert "Traceback" not in done.stdout + done.stderr


def test_the_report_target_is_read_as_snakemake_reads_it():
    assert study_config.report_target(["snakemake", "--cores", "1"]) is None
    assert study_config.report_target(["snakemake", "--report"]) == Path("report.html")
    assert study_config.report_target(["snakemake", "--report", "--cores", "1"]) == Path("report.html")
    assert study_config.report_target(["snakemake", "--report", "r/x.zip"]) == Path("r/x.zip")
    assert study_config.report_target(["snakemake", "--report=x.html"]) == Path("x.html")


@pytest.mark.skipif(os.getuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_the_jobs_write_is_said(tmp_path):
    report = tmp_path / "report"
    report.mkdir(mode=0o555)
    with pytest.raises(study_config.ConfigError, match=f"^{report} is read-only to this user"):
        study_config.check_writable_folders([tmp_path / "results/default", report / "default"])
    with pytest.raises(study_config.ConfigError, match="is read-only to this user: give a path"):
        study_config.check_writable(report / "r.html", "snakemake --report")


# A newcomer's first hour: where the report is, and what make can do.
@pytest.mark.workflow
def test_a_run_ends_saying_where_its_report_is(tmp_path):
    workdir = new_workdir(tmp_path / "w")
    # precision alone: seconds
    sections = ("timing", "nsys", "memory", "attention", "compile", "ladder", "comm", "ddp", "sharding")
    off = [f"{name}={{enabled: false}}" for name in sections]
    done = snakemake(workdir, "--cores", "2", "--config", "preset=smoke", *off)
    said = f"The report of run default: {workdir / 'report/default/index.html'} (open it in a browser)."
    assert said in done.stderr.splitlines()[-4:], done.stderr[-2000:]


@pytest.mark.parametrize("target", [[], ["help"]])
def test_bare_make_and_make_help_list_what_make_does_and_install_nothing(target, tmp_path):
    venv = tmp_path / "venv"
    # Run as a user would, not as a sub-make of `make test` (which would print "Entering directory").
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    done = subprocess.run(["make", *target, f"VENV={venv}"], cwd=REPO, capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("make study ") and any(line.startswith("make help") for line in lines)
    assert not venv.exists()


def test_a_config_yaml_that_is_not_yaml_is_said_with_its_line(tmp_path):
    workdir = new_workdir(tmp_path / "w")
    config = workdir / "config.yaml"
    config.write_text(config.read_text().replace("\nbatch_size: 4\n", "\nbatch_size: [4\n", 1))
    done = snakemake(workdir, "-n", check=False)
    said = ("config.yaml: line 14, column 11: expected ',' or ']', but got ':' "
            "(while parsing a flow sequence at line 13)")
    assert done.returncode != 0 and said in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
