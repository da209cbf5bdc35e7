"""The study end to end on a model of the user's own, defined in a file outside the package.

The model is tests/fixtures/models/encoder_lm.py (torch.nn.TransformerEncoder
with a causal mask: nothing of the built-in model), named by a path relative
to the project root, as a user's config.yaml would. CI's time is tight: the
built-in smoke study already takes about 8 minutes on 2 cores, so this run is
the smoke preset cut down by a --configfile to what the assertions read: one
size, one context length, the timing section (the model table: name,
parameters, FLOPs counted by FlopCounterMode; its sdpa variant, in bf16, rows
"not applicable": the factory takes no `attention`) and the profile section
(the kernel table by module path, forward and backward), and the precision section (the model's dtypes
under autocast, observed by hooks on its modules), and the data-parallel and sharding sections (their
jobs train it in 2 Gloo processes); the other sections run on any model through the
same build and are covered by the unit tests (tests/test_model_factory.py).
The invalidation test reuses the finished run (a dry-run after an edit).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lmstudy.measure.factory import build_model
from lmstudy.model_choice import choice_from_config
from lmstudy.report.answers import significant

from .conftest import REPO, new_workdir, snakemake
from .test_invalidation import dry_run

# Every test reads own_model_run, a run of the workflow's jobs: the unit loop skips them.
pytestmark = pytest.mark.workflow

FACTORY = "tests/fixtures/models/encoder_lm.py:build"
NAME = "encoder-lm"
TINY = {"d_model": 64, "d_ff": 256, "num_layers": 2, "num_heads": 4}
OVERRIDES = {
    "model": {"factory": FACTORY, "name": NAME, "range_depth": None},
    "timing": {"sizes": ["tiny"], "context_lengths": [32], "precisions": ["fp32", "bf16"],
               "variants": ["naive", "sdpa"], "passes": ["forward", "train_step"]},
    "nsys": {"sizes": ["tiny"], "context_lengths": [32]},
    "memory": {"enabled": False},
    "attention": {"enabled": False},
    "compile": {"enabled": False},
    "ladder": {"enabled": False},
    # The all-reduce does not involve the model; ddp and sharding train it (smoke: 2 Gloo processes).
    "comm": {"enabled": False},
}


def run_args(workdir: Path) -> tuple[str, ...]:
    return ("--config", "preset=smoke", "--configfile", str(workdir / "own_model.yaml"))


@pytest.fixture(scope="module")
def own_model_run(tmp_path_factory) -> Path:
    workdir = new_workdir(tmp_path_factory.mktemp("own_model"))
    (workdir / "own_model.yaml").write_text(yaml.safe_dump(OVERRIDES))
    snakemake(workdir, "--cores", "2", *run_args(workdir))
    return workdir


def test_the_report_names_the_model_counts_all_its_parameters_and_shows_kernels_by_module(own_model_run):
    report = (own_model_run / "report/default/report.md").read_text()
    model = build_model(choice_from_config(OVERRIDES["model"], TINY), {**TINY, "vocab_size": 512}, 32)
    params = sum(p.numel() for p in model.parameters())  # the tied head counted once
    model_table = (own_model_run / "report/default/tables/timing_model.csv").read_text()
    assert NAME in report.split("## ")[0]  # the header
    assert NAME in model_table and "FlopCounterMode" in model_table
    assert significant(params / 1e6) in model_table  # three significant digits, as every count
    modules = (own_model_run / "report/default/tables/nsys_modules.csv").read_text()
    assert "encoder.layers.*.self_attn" in modules and "encoder.layers.*.linear1" in modules
    assert "no kernel ran in the built-in model's attention sub-ranges" in report
    # its factory takes no `attention` keyword: the sdpa variant's rows say so (issue 25, the ladder's way)
    timing = (own_model_run / "results/default/timing/timing.csv").read_text()
    assert "not applicable" in timing and "needs a factory that takes an `attention` keyword" in timing
    assert "not applicable" in report
    # the backward's module ranges: the kernel table by module has backward rows
    assert "backward" in modules
    # section 3: its dtypes under autocast, observed by hooks on its own modules
    assert f"Dtypes under autocast in {NAME}" in report
    dtypes = pd.read_csv(own_model_run / "report/default/tables/precision_model_dtypes.csv")
    dtypes = dtypes.set_index("tensor")
    assert "output of encoder.layers.* (TransformerEncoderLayer)" in dtypes.index
    head = dtypes.loc["output of head (Linear)"]
    assert [head["fp16 autocast"], head["bf16 autocast"]] == ["float16", "bfloat16"]
    # Issue 32, item 12: the normalisation experiment says whose activations it ran on.
    assert "run on the lmstudy built-in Transformer LM's own activations (size tiny" in report
    assert f"These are not the activations of the model this study measures ({NAME})" in report
    assert "the study model's own activations" not in report


def assert_every_measurement_reruns(jobs, run: Path) -> None:
    """Every measurement of the model reruns, and only those: each timing job (one per precision and
    variant), the profile, the precision job, which observes the model's dtypes (the norms' job
    studies the built-in RMSNorm: not the model's), and the distributed sections' training of it."""
    measured = [job.rule for job in jobs if job.measures]
    assert set(measured) == {"precision_experiments", "profile_model", "time_model", "train_ddp",
                             "shard_optimizer"}
    assert measured.count("time_model") == len(list((run / "results/default/timing/raw").glob("*.csv")))


def test_editing_the_factory_file_reruns_exactly_its_measurements(own_model_run, tmp_path):
    """A copy of this working tree whose factory file is edited, dry-run against a copy of the finished
    run (the input trigger left out: the copy's paths are new, as in tests/test_invalidation.py)."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\0")
    repo = tmp_path / "repo"
    for name in filter(None, files):
        if (REPO / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, repo / name)
    run = tmp_path / "run"
    shutil.copytree(own_model_run, run, symlinks=True)
    args = ("-s", str(repo / "Snakefile"), "--rerun-triggers", "mtime", "params", "code", "software-env",
            *run_args(run))
    assert dry_run(run, *args) == []
    factory = repo / FACTORY.split(":")[0]
    factory.write_text(factory.read_text() + "# a comment reruns nothing\n")
    assert dry_run(run, *args) == []
    factory.write_text(factory.read_text().replace("dropout=0.0", "dropout=0.0, norm_first=True"))
    jobs = dry_run(run, *args)
    assert_every_measurement_reruns(jobs, run)
    assert all(job.rule not in {"nsys_backend"} for job in jobs)


def test_changing_model_reruns_every_measurement_through_the_job_spec(own_model_run, tmp_path):
    """model: travels in each measuring job's spec (lmstudy.job_spec): a new name reruns them all."""
    run = shutil.copytree(own_model_run, tmp_path / "run", symlinks=True)
    renamed = {**OVERRIDES, "model": {**OVERRIDES["model"], "name": "renamed"}}
    (run / "own_model.yaml").write_text(yaml.safe_dump(renamed))
    jobs = dry_run(run, *run_args(run))
    assert_every_measurement_reruns(jobs, run)
