"""Scheduler resources estimated from the model's size (lmstudy.resources)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from lmstudy import flops, resources

from .conftest import GPU_RULES, REPO, SNAKEMAKE, new_workdir


@pytest.mark.parametrize(
    "dims",
    [
        {"d_model": 64, "d_ff": 256, "num_layers": 2, "num_heads": 4},
        {"d_model": 96, "d_ff": 200, "num_layers": 3, "num_heads": 3},
    ],
)
def test_parameter_count_matches_the_model(dims):
    from lmstudy.measure.model import Linear, ModelConfig, TransformerLM, count_parameters

    model = TransformerLM(ModelConfig(vocab_size=512, context_length=32, **dims))
    assert flops.parameter_count(vocab_size=512, **dims) == count_parameters(model)
    # The N of 6N: the weights of matrix products, the LM head's among them.
    in_matmuls = sum(m.weight.numel() for m in model.modules() if isinstance(m, Linear))
    assert flops.parameter_count(vocab_size=512, in_matmuls=True, **dims) == in_matmuls


def test_larger_models_ask_for_more_time_and_memory():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    asks = [
        resources.gpu_job(config["sizes"][name], config["vocab_size"], 512)
        for name in ("small", "medium", "large", "xl", "2.7B")
    ]
    assert all(ask["gpu"] == 1 for ask in asks)
    for smaller, larger in zip(asks, asks[1:], strict=False):
        assert larger["runtime"] > smaller["runtime"]
        assert larger["mem_mb"] > smaller["mem_mb"]
    # room for the 2.7B model's fp32 weights (13.6 GB with SwiGLU) in host memory
    assert asks[-1]["mem_mb"] > 3.4e9 * 4 / 2**20


def test_longer_contexts_ask_for_more_time():
    dims = {"d_model": 2560, "d_ff": 10240, "num_layers": 32, "num_heads": 32}
    short = resources.gpu_job(dims, 10000, 128)
    long = resources.gpu_job(dims, 10000, 4096)
    assert long["runtime"] > short["runtime"]
    assert long["mem_mb"] == short["mem_mb"]


OVERSIZED = {"d_model": 64, "d_ff": 2**30, "num_layers": 1}  # the smoke preset's: 2e11 parameters


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_model_that_cannot_be_built_asks_only_for_the_base(device):
    ask = resources.gpu_job(OVERSIZED, 512, 32, device=device)
    assert ask == {"gpu": 1, "runtime": resources.BASE_RUNTIME_MIN, "mem_mb": resources.BASE_MEM_MB}


def test_requests_stop_at_the_caps():
    dims = {"d_model": 2560, "d_ff": 10240, "num_layers": 32, "num_heads": 32}
    free = resources.gpu_job(dims, 10000, 1024)
    capped = resources.gpu_job(dims, 10000, 1024, max_mem_mb=8000, max_runtime_min=60)
    assert free["mem_mb"] > 8000 and free["runtime"] > 60
    assert capped == {"gpu": 1, "runtime": 60, "mem_mb": 8000}
    # on the CPU the device is host memory: a model that outgrows the cap cannot run
    assert resources.gpu_job(dims, 10000, 1024, device="cpu", max_mem_mb=8000)["mem_mb"] == 4096


def planned_resources(workdir: Path, *args: str, env: dict | None = None, profile: Path | None = None):
    """rule -> [resources of each job] that a dry run through the SLURM profile plans."""
    done = subprocess.run(
        [*SNAKEMAKE, "-d", str(workdir), "-n", "--workflow-profile", str(profile or REPO / "profiles/slurm"),
         "--config", "preset=smoke", *args],
        capture_output=True, text=True, cwd=workdir,
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    planned = {}
    for rule, res in re.findall(r"^rule (\w+):\n(?:    .*\n)*?    resources: (.*)$", done.stdout, re.M):
        planned.setdefault(rule, []).append(dict(kv.split("=", 1) for kv in res.split(", ")))
    assert planned, done.stdout[-3000:]
    return planned


@pytest.mark.workflow
@pytest.mark.parametrize("cpu_partition", [None, "cpu"])
def test_only_gpu_jobs_go_to_the_gpu_partition(tmp_path, cpu_partition):
    env = {"LMSTUDY_SLURM_PARTITION": "gpu", "LMSTUDY_SLURM_CPU_PARTITION": cpu_partition}
    planned = planned_resources(new_workdir(tmp_path), env=env)
    assert GPU_RULES <= set(planned)
    for rule, jobs in planned.items():
        for job in jobs:
            if rule in GPU_RULES:
                assert (job["slurm_partition"], job["gpu"]) == ("gpu", "1"), rule
            else:  # empty: the plugin submits to the cluster's default partition
                assert job["slurm_partition"] == (cpu_partition or ""), rule
                assert "gpu" not in job, rule


@pytest.mark.workflow
def test_a_cpu_job_sent_to_the_cluster_asks_for_the_profiles_defaults(tmp_path):
    """memory_summary, the one rule without a GPU that is not a localrule, runs only on a GPU run."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())["default-resources"]
    planned = planned_resources(new_workdir(tmp_path), "device=cuda")
    summaries = planned["memory_summary"]
    assert summaries and "memory_snapshot" in planned
    for job in summaries:
        assert "gpu" not in job
        assert [int(job[name]) for name in ("mem_mb", "runtime", "cpus_per_task")] == [
            profile["mem_mb"], profile["runtime"], profile["cpus_per_task"]]
    assert {job["gpu"] for job in planned["memory_snapshot"]} == {"1"}


@pytest.mark.workflow
def test_oversized_smoke_jobs_ask_for_what_they_can_use(tmp_path):
    planned = planned_resources(new_workdir(tmp_path), "--forceall")
    asks = {(int(job["mem_mb"]), int(job["runtime"])) for rule in GPU_RULES for job in planned[rule]}
    assert max(asks) <= (5000, 15), asks


@pytest.mark.workflow
def test_the_profile_caps_what_every_job_asks_for(tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    text = (REPO / "profiles/slurm/config.yaml").read_text()
    assert "lmstudy_max_mem_mb: 16000" in text and "lmstudy_max_runtime: 240" in text
    text = text.replace("lmstudy_max_mem_mb: 16000", "lmstudy_max_mem_mb: 4200")
    (profile / "config.yaml").write_text(text.replace("lmstudy_max_runtime: 240", "lmstudy_max_runtime: 7"))
    planned = planned_resources(new_workdir(tmp_path / "work"), profile=profile)
    gpu_asks = [job for rule in GPU_RULES for job in planned[rule]]
    assert {job["runtime"] for job in gpu_asks} == {"7"}
    assert {job["mem_mb"] for job in gpu_asks} == {"4200", "4096"}  # the tiny model's 4352 capped; the base


def test_a_refused_submission_names_the_settings(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("nothing went wrong here\n")
    assert resources.refused_submission_hint(str(log)) == ""
    log.write_text(
        "Error in rule time_model:\n    message: SLURM sbatch failed. The error message was 'sbatch: error: "
        "Batch job submission failed: Requested node configuration is not available'.\n"
    )
    hint = resources.refused_submission_hint([str(log)])
    assert "lmstudy_max_mem_mb" in hint and "profiles/slurm/config.yaml" in hint
