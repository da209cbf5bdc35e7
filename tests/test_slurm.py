"""The smoke study on a real SLURM cluster, through profiles/slurm.

The session fixture brings up a private single-node cluster on this machine
with .ci/slurm-up.sh (slurmctld + slurmd + munged from Debian's slurm-wlm) in
the shape of a real one: a default CPU partition, a non-default GPU partition
with a typed GPU GRES, no accounting database, MinJobAge at its default, and
slurm.conf found only through SLURM_CONF. Afterwards .ci/slurm-down.sh stops
its daemons and undoes what it changed, whatever happened.

It installs packages and starts daemons, so it runs only when asked: in CI
(the CI environment variable set), with `make test-slurm`, or with
LMSTUDY_TEST_SLURM=1; otherwise its tests are skipped, saying so. When asked,
a cluster that does not come up fails the tests.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from .conftest import GPU_RULES, REPO, SNAKEMAKE, new_workdir

# Every test runs jobs of the workflow on the cluster: the unit loop skips them.
pytestmark = pytest.mark.workflow

SLURM_UP = REPO / ".ci/slurm-up.sh"
SLURM_DOWN = REPO / ".ci/slurm-down.sh"
CPU_PARTITION = "cpu"  # the default partition
GPU_PARTITION = "gpu"
# Cheap joins and the report: localrules, run by Snakemake on the submit host, never sbatch jobs.
LOCAL_RULES = {"aggregate_timing", "aggregate_nsys", "aggregate_attention", "aggregate_compile",
               "aggregate_ladder", "memory_table", "study_cost", "figures", "report", "aggregate_comm",
               "aggregate_ddp", "aggregate_sharding"}


# The smoke preset cut to the fewest jobs that still run every rule, and the
# oversized model's OOM rows (timing keeps both sizes).
SLURM_GRID = (
    "timing={context_lengths: [32], precisions: [fp32], variants: [naive]}",
    "nsys={sizes: [tiny]}",
    "attention={head_dims: [8], seq_lens: [32], implementations: [naive, sdpa]}",
    # The oversized model's compile job runs out of memory at once: the rule runs, nothing compiles.
    "compile={sizes: [oversized]}",
    "ladder={sizes: [tiny], rungs: [fp32, bf16]}",
)


def asked() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("LMSTUDY_TEST_SLURM", "") not in ("", "0")


def _unavailable(reason: str):
    pytest.fail(f"the SLURM test was asked for, but {reason}")


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A running private cluster; yields the environment that reaches it."""
    if not asked():
        pytest.skip(
            "the real-SLURM test installs and starts SLURM on this machine: run it with "
            "`make test-slurm` or LMSTUDY_TEST_SLURM=1 (CI runs it)"
        )
    if os.geteuid() != 0:
        _unavailable(".ci/slurm-up.sh must run as root to install and start SLURM")
    if not (shutil.which("apt-get") or shutil.which("sbatch")):
        _unavailable("neither SLURM nor apt-get (to install Debian's slurm-wlm) is on this machine")
    cluster = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "SLURM_DIR": str(cluster), "SLURM_CPU_PARTITION": CPU_PARTITION,
           "SLURM_GPU_PARTITION": GPU_PARTITION}
    hosts_before = Path("/etc/hosts").read_text()
    etc_before = {p: p.exists() for p in (Path("/etc/slurm/slurm.conf"), Path("/etc/munge/munge.key"))}
    try:
        up = subprocess.run(["bash", str(SLURM_UP)], capture_output=True, text=True, timeout=900, env=env)
        if up.returncode != 0:
            _unavailable(f".ci/slurm-up.sh failed:\n{up.stdout[-2000:]}\n{up.stderr[-3000:]}")
        yield {"SLURM_CONF": str(cluster / "slurm.conf"), "LMSTUDY_SLURM_PARTITION": GPU_PARTITION,
               "logs": cluster / "log"}
    finally:
        kept = tmp_path_factory.mktemp("cluster-logs")
        if (cluster / "log").exists():
            shutil.copytree(cluster / "log", kept, dirs_exist_ok=True)
        down = subprocess.run(["bash", str(SLURM_DOWN)], capture_output=True, text=True, timeout=600, env=env)
        assert down.returncode == 0, down.stdout + down.stderr
        # what it changed is undone: no daemon of it, no directory, /etc as it was
        assert not cluster.exists()
        assert Path("/etc/hosts").read_text() == hosts_before
        if os.environ.get("SLURM_KEEP_PACKAGES") != "1":  # the packages' own files go with them
            assert {p: p.exists() for p in etc_before} == etc_before
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(cluster) not in ps


def slurm_env(cluster: dict, **extra) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
    env.update({k: v for k, v in cluster.items() if k != "logs"})
    env.pop("LMSTUDY_SLURM_CPU_PARTITION", None)  # the CPU jobs: the cluster's default partition
    return env


def submitted(log: str) -> dict[str, list[str]]:
    """rule -> the SLURM job ids its jobs were submitted as, from Snakemake's log."""
    jobs = {}
    pattern = r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_(\w+?)/"
    for jobid, rule in re.findall(pattern, log):
        jobs.setdefault(rule, []).append(jobid)
    return jobs


def partitions(slurmctld_log: str) -> dict[str, str]:
    """SLURM job id -> the partition slurmctld started it in, from its own log."""
    started = dict(re.findall(r"Allocate JobId=(\d+) \S+ #CPUs=\d+ Partition=(\S+)", slurmctld_log))
    started.update(re.findall(r"Started JobId=(\d+) in (\S+) on", slurmctld_log))
    return started


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory):
    """Every rule of the smoke study, every job an sbatch job.

    The grid is cut to one job or two per rule (SLURM_GRID): what is tested
    here is submission, partitions and resources, which every job of a rule
    shares; the full smoke grid, run on the CPU by tests/test_workflow_smoke.py,
    would only add minutes of sbatch round trips to CI.
    """
    workdir = new_workdir(tmp_path_factory.mktemp("slurm"))
    done = subprocess.run(
        [*SNAKEMAKE, "-d", str(workdir), "--workflow-profile", str(REPO / "profiles/slurm"),
         "--config", "preset=smoke", *SLURM_GRID,
         "--slurm-init-seconds-before-status-checks", "5", "--verbose"],
        capture_output=True, text=True, cwd=workdir, timeout=2400, env=slurm_env(slurm_cluster),
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
    slurmctld_log = (slurm_cluster["logs"] / "slurmctld.log").read_text()
    return workdir, calls, submitted(log), partitions(slurmctld_log)


def sbatch_options(call: str) -> list[str]:
    """The options of an sbatch call, before the job's own command (--wrap)."""
    return shlex.split(call.split("--wrap=", 1)[0])


def test_the_smoke_study_completes_on_slurm(slurm_run):
    workdir, calls, jobs, _ = slurm_run
    assert GPU_RULES <= set(calls)
    assert not LOCAL_RULES & set(calls)
    raw = list((workdir / "results/default/timing/raw").glob("*.csv"))
    assert raw and len(calls["time_model"]) == len(raw)  # one SLURM job per measurement
    md = (workdir / "report/default/report.md").read_text()
    assert re.search(r"^\| tiny \| 32 \| forward \|", md, re.M)
    assert re.search(r"^\| oversized \| \d+ \| training step \| fp32 \| OOM \|", md, re.M)
    # every other job ran as a SLURM job and left its SLURM log
    slurm_logs = list((workdir / ".snakemake/slurm_logs").rglob("*.log"))
    assert len(slurm_logs) == sum(len(c) for c in calls.values()) == sum(len(j) for j in jobs.values())


def test_gpu_jobs_ran_on_the_gpu_partition_and_the_others_on_the_default(slurm_run):
    _, calls, jobs, started = slurm_run
    assert set(jobs) == set(calls)
    where = {rule: {started[j] for j in ids} for rule, ids in jobs.items()}
    assert {rule: parts for rule, parts in where.items() if rule in GPU_RULES} == {
        rule: {GPU_PARTITION} for rule in GPU_RULES
    }
    assert {rule: parts for rule, parts in where.items() if rule not in GPU_RULES} == {
        rule: {CPU_PARTITION} for rule in set(jobs) - GPU_RULES
    }
    for rule, rule_calls in calls.items():
        for call in rule_calls:
            options = sbatch_options(call)
            if rule in GPU_RULES:
                assert "--gpus=1" in options and options[options.index("-p") + 1] == GPU_PARTITION, call
            else:
                assert not any("gpu" in o for o in options), call


def test_on_slurm_the_gpu_is_the_schedulers_with_no_lease(slurm_run):
    workdir = slurm_run[0]
    timing = pd.read_csv(workdir / "results/default/timing/timing.csv")
    assert set(timing["gpu_chosen_by"]) == {"slurm"}
    assert not any("gpu lease" in log.read_text() for log in (workdir / "logs/default/timing").glob("*.log"))


def test_jobs_ask_for_what_they_can_use(slurm_run):
    from lmstudy import resources

    workdir, calls, _, _ = slurm_run
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())["default-resources"]
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    smoke = config["presets"]["smoke"]
    for call in calls["time_model"]:
        options = sbatch_options(call)
        size = re.search(r"size=(\w+)", call).group(1)
        ctx = int(re.search(r"ctx=(\d+)", call).group(1))
        expected = resources.gpu_job(
            smoke["sizes"][size], smoke["vocab_size"], ctx, device="cpu",
            max_mem_mb=profile["lmstudy_max_mem_mb"], max_runtime_min=profile["lmstudy_max_runtime"],
        )
        assert int(options[options.index("-t") + 1]) == expected["runtime"]
        assert int(options[options.index("--mem") + 1]) == expected["mem_mb"] <= 5000
    # Every job sent to the cluster is a GPU job, sized as above: the CPU-side rules are localrules,
    # and the one that is not, memory_summary, has no snapshot to read on a CPU. That it asks for the
    # profile's defaults on a GPU run is tests/test_resources.py's (a dry run through this profile).
    assert set(calls) == GPU_RULES, f"sent to the cluster, not a GPU rule: {set(calls) - GPU_RULES}"


def test_the_profiler_was_settled_on_the_gpu_partition(slurm_run):
    workdir, calls, _, _ = slurm_run
    assert len(calls["nsys_backend"]) == 1
    runs = pd.read_csv(workdir / "results/default/nsys/runs.csv")
    assert set(runs["backend"]) == {"torch"}
    log = (workdir / "logs/default/nsys/backend.log").read_text()
    assert log.startswith("profiling backend: torch (torch.profiler); requested: auto.")


def one_timing_job(slurm_cluster, tmp_path, time_model_resources: dict) -> subprocess.CompletedProcess:
    """One timing job through profiles/slurm with `time_model_resources` set for it."""
    workdir = new_workdir(tmp_path / "work")
    profile = tmp_path / "profile"
    profile.mkdir()
    settings = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    settings["set-resources"] = {"time_model": time_model_resources}
    (profile / "config.yaml").write_text(yaml.safe_dump(settings))
    return subprocess.run(
        [*SNAKEMAKE, "results/default/timing/raw/tiny_ctx32_fp32_naive.csv", "-d", str(workdir),
         "--workflow-profile", str(profile), "--config", "preset=smoke"],
        capture_output=True, text=True, cwd=workdir, timeout=600, env=slurm_env(slurm_cluster),
    )


def test_a_refused_submission_names_the_setting_to_change(slurm_cluster, tmp_path):
    """A job asking for more memory than any node has: sbatch refuses it, the run says what to change."""
    done = one_timing_job(slurm_cluster, tmp_path, {"mem_mb": 100 * 2**20})  # 100 TiB
    assert done.returncode != 0
    assert "Requested node configuration is not available" in done.stderr
    assert "lower lmstudy_max_mem_mb (host memory, MiB)" in done.stderr
    assert "profiles/slurm/config.yaml" in done.stderr


def test_a_job_over_its_partitions_time_limit_is_stopped_before_submission(slurm_cluster, tmp_path):
    """Issue 23, item 19: the GPU partition's MaxTime is 4 hours; a job asking for 10 would pend forever."""
    done = one_timing_job(slurm_cluster, tmp_path, {"runtime": 600})
    assert done.returncode != 0
    assert "time limit of 600 minutes on partition 'gpu', whose MaxTime is 240 minutes" in done.stderr
    assert "lower lmstudy_max_runtime" in done.stderr and "Traceback" not in done.stderr
    assert "submitted with SLURM jobid" not in done.stdout + done.stderr  # nothing left pending
