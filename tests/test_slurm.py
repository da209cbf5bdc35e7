"""The smoke study on a real SLURM cluster, through profiles/slurm.

The session fixture brings up a single-node cluster on this machine
(slurmctld + slurmd + munge from Debian's slurm-wlm, one GPU GRES) with
.ci/slurm-up.sh. In CI (the CI environment variable set) a cluster that does
not come up fails the test; elsewhere the test is skipped, saying why.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, SNAKEMAKE, new_workdir

SLURM_UP = REPO / ".ci/slurm-up.sh"
PARTITION = "debug"


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"CI needs a SLURM cluster, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """A running single-node SLURM cluster; returns its partition."""
    if os.geteuid() != 0:
        _unavailable(".ci/slurm-up.sh must run as root to install and start SLURM")
    if not (shutil.which("apt-get") or shutil.which("sbatch")):
        _unavailable("neither SLURM nor apt-get (to install Debian's slurm-wlm) is on this machine")
    up = subprocess.run(
        ["bash", str(SLURM_UP)], capture_output=True, text=True, timeout=900,
        env={**os.environ, "SLURM_PARTITION": PARTITION},
    )
    if up.returncode != 0:
        _unavailable(f".ci/slurm-up.sh failed:\n{up.stdout[-2000:]}\n{up.stderr[-3000:]}")
    return PARTITION


def timing_only_smoke_config(workdir: Path) -> None:
    """The smoke preset with only the timing section and only the `tiny` size.

    `oversized` asks for more host memory than this one node has, so SLURM
    would refuse it; the other sections add nothing to what is tested here.
    """
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["preset"] = "smoke"
    for name, section in config.items():
        if isinstance(section, dict) and "enabled" in section:
            section["enabled"] = name == "timing"
    config["presets"]["smoke"]["timing"]["sizes"] = ["tiny"]
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory):
    workdir = new_workdir(tmp_path_factory.mktemp("slurm"))
    timing_only_smoke_config(workdir)
    done = subprocess.run(
        [*SNAKEMAKE, "-d", str(workdir), "--workflow-profile", str(REPO / "profiles/slurm"),
         "--slurm-init-seconds-before-status-checks", "5", "--verbose"],
        capture_output=True, text=True, cwd=workdir, timeout=1500,
        env={**os.environ, "LMSTUDY_SLURM_PARTITION": slurm_cluster, "PYTHONUNBUFFERED": "1"},
    )
    log = done.stdout + done.stderr
    (workdir / "snakemake-slurm.log").write_text(log)
    assert done.returncode == 0, f"snakemake through profiles/slurm failed:\n{log[-8000:]}"
    calls = {}
    for line in log.splitlines():
        if "sbatch call: " in line:
            call = line.split("sbatch call: ", 1)[1]
            rule = re.search(r"--comment rule_(\w+?)(?:_wildcards_\S*)?\s", call).group(1)
            calls.setdefault(rule, []).append(call)
    return workdir, calls, log


def sbatch_options(call: str) -> list[str]:
    """The options of an sbatch call, before the job's own command (--wrap)."""
    return shlex.split(call.split("--wrap=", 1)[0])


def test_the_report_is_rendered_from_jobs_run_on_slurm(slurm_run):
    workdir, calls, _ = slurm_run
    assert set(calls) == {"time_model", "aggregate_timing", "figures", "report"}
    raw = list((workdir / "results/default/timing/raw").glob("tiny_*.csv"))
    assert raw and len(calls["time_model"]) == len(raw)  # one SLURM job per measurement
    html = (workdir / "report/index.html").read_text()
    assert "tiny" in html
    md = (workdir / "report/report.md").read_text()
    assert re.search(r"^\| tiny \| 32 \| forward \|", md, re.M)
    # every job ran as a SLURM job and left its SLURM log
    slurm_logs = list((workdir / ".snakemake/slurm_logs").rglob("*.log"))
    assert len(slurm_logs) == sum(len(c) for c in calls.values())


def test_gpu_jobs_ask_slurm_for_one_gpu_and_others_for_none(slurm_run):
    _, calls, _ = slurm_run
    for call in calls["time_model"]:
        options = sbatch_options(call)
        assert "--gpus=1" in options, call
        assert options[options.index("-p") + 1] == PARTITION
    for rule in ("aggregate_timing", "figures", "report"):
        for call in calls[rule]:
            assert not any("gpu" in o for o in sbatch_options(call)), call


def test_gpu_jobs_ask_for_time_and_memory_by_model_size(slurm_run):
    from lmstudy import resources

    workdir, calls, _ = slurm_run
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    tiny = config["presets"]["smoke"]["sizes"]["tiny"]
    vocab = config["presets"]["smoke"]["vocab_size"]
    for call in calls["time_model"]:
        options = sbatch_options(call)
        ctx = int(re.search(r"ctx=(\d+)", call).group(1))
        expected = resources.gpu_job(tiny, vocab, ctx)
        assert int(options[options.index("-t") + 1]) == expected["runtime"]
        assert int(options[options.index("--mem") + 1]) == expected["mem_mb"]
    for call in calls["report"]:
        options = sbatch_options(call)
        assert options[options.index("--mem") + 1] == "4000"  # profile default


def test_slurm_recorded_the_gpu_request(slurm_run):
    """SLURM itself, not only the command line: squeue shows the GPU per job."""
    _, calls, _ = slurm_run
    run_name = re.search(r"--job-name (\S+)", calls["report"][0]).group(1)
    jobs = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--name", run_name,
         "-O", "JobID:12,State:12,tres-per-job:24,Comment:80"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    by_rule = {}
    for line in jobs:
        _, state, tres, comment = line.split(None, 3)
        assert state == "COMPLETED", line
        rule = re.match(r"rule_([a-z_]+?)(_wildcards|$)", comment.strip()).group(1)
        by_rule.setdefault(rule, []).append(tres)
    assert by_rule["time_model"] == ["gres:gpu:1"] * len(calls["time_model"])
    assert set(by_rule["report"]) == {"N/A"}
