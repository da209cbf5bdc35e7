"""The data-parallel and sharding sections on a model of the user's own (issue 42: "on the built-in model and
on the user's own"), on the CPU with Gloo and 2 processes.

The model is tests/fixtures/models/encoder_lm.py (torch.nn.TransformerEncoder with a causal mask, a
tied LM head: nothing of the built-in model), named by config model: as a user's config names it.
Each version of data-parallel training, and AdamW with its state sharded, ends with the parameters one
process training on both ranks' batches ends with; the jobs, run as the workflow runs them, write rows
that name the model; and a dry run of the workflow with model: plans those jobs with it in their spec.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from .conftest import REPO, new_workdir, snakemake
from .specs import spec_fields

torch = pytest.importorskip("torch")

from lmstudy.measure.distributed import run_group  # noqa: E402
from lmstudy.measure.distributed_bench import _model, equality_rank, single_process  # noqa: E402
from lmstudy.measure.model import cross_entropy  # noqa: E402
from lmstudy.sections.training_runs import method_values  # noqa: E402

from .test_data_parallel import SPEC as BUILT_IN_SPEC  # noqa: E402

FACTORY = "tests/fixtures/models/encoder_lm.py:build"
NAME = "encoder-lm"
MODEL = {"factory": FACTORY, "name": NAME, "range_depth": None, "extra": []}
# The equality check's tiny training (tests/test_data_parallel.py), on the user's model.
SPEC = {**BUILT_IN_SPEC, "model": MODEL}


@pytest.fixture(scope="module")
def trained():
    ranks = run_group(equality_rank, 2, "cpu", SPEC, "the equality check of the user's model")
    return ranks, np.array(single_process(SPEC, 2))


def key_biases(model) -> np.ndarray:
    """Where the attention's key biases lie among the flattened parameters (as equality_rank flattens
    them): the middle third of each nn.MultiheadAttention's in_proj_bias."""
    where, offset = [], 0
    for name, p in model.named_parameters():
        if name.endswith("self_attn.in_proj_bias"):
            third = p.numel() // 3
            where.extend(range(offset + third, offset + 2 * third))
        offset += p.numel()
    return np.array(where)


@pytest.fixture(scope="module")
def encoder():
    return _model(SPEC, torch.device("cpu"))


def test_the_key_bias_has_no_gradient_but_rounding(encoder):
    """Why the comparison leaves the key biases out: a key bias adds q·b to a whole row of attention
    scores, which the softmax ignores, so its gradient is zero in exact arithmetic and rounding in fact;
    AdamW divides that by its own square root (m/√v): ±lr steps whose signs follow the rounding, which
    every summation order (one process, two ranks) draws anew."""
    tokens = torch.randint(0, SPEC["vocab_size"], (2, SPEC["context_length"] + 1))
    cross_entropy(encoder(tokens[:, :-1]), tokens[:, 1:]).backward()
    grads = torch.cat([p.grad.flatten() for p in encoder.parameters()]).abs()
    keys = key_biases(encoder)
    others = np.setdiff1d(np.arange(len(grads)), keys)
    assert grads[keys].max() < 1e-6 * grads[others].max()


def test_every_version_trains_the_users_model_as_one_process(trained, encoder):
    ranks, single = trained
    versions = [key for key in ranks[0] if key != "none"]
    assert set(versions) == {"naive", "flat", "overlapped", "bucketed-0.001", "bucketed-1", "ddp", "sharded"}
    kept = np.setdiff1d(np.arange(len(single)), key_biases(encoder))  # rounding, not training: above
    assert len(kept) > 0.95 * len(single)
    for version in versions:  # "sharded": AdamW's state sharded, equal to AdamW's unsharded
        for rank in ranks:
            np.testing.assert_allclose(
                np.array(rank[version])[kept], single[kept], rtol=1e-4, atol=1e-5, err_msg=version
            )


def test_the_users_model_is_the_one_trained(trained):
    """The check compares the encoder's parameters, not the built-in model's: their count is its own."""
    ranks, single = trained
    builtin = single_process({**SPEC, "model": {**MODEL, "factory": "lmstudy.measure.model:build"}}, 2)
    assert len(single) != len(builtin)
    assert not np.allclose(ranks[0]["none"], single, rtol=1e-4, atol=1e-5)  # the check can fail


def _run_job(job: str, tmp_path, model: dict, extra_env=None, **overrides) -> tuple[int, pd.DataFrame]:
    """`lmstudy measure <job>` of the smoke preset's spec with `model` (and `overrides`), as the workflow
    runs it: the job's pid and its rows."""
    spec = spec_fields(job, model=model, warmup_steps=1, timed_steps=2, **overrides)
    process = subprocess.Popen(
        [sys.executable, "-m", "lmstudy", "measure", job, "--spec", json.dumps(spec),
         "--out", str(tmp_path / f"{job}.csv")],
        cwd=tmp_path, env={**os.environ, **(extra_env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output[-4000:]
    return process.pid, pd.read_csv(tmp_path / f"{job}.csv")


def test_the_ddp_job_trains_the_users_model_in_every_version(tmp_path):
    _, rows = _run_job("ddp", tmp_path, MODEL)
    assert set(rows["model"]) == {NAME}
    assert set(rows["version"]) == set(spec_fields("ddp")["versions"])
    assert set(rows["rank"]) == {0, 1} and rows["step_s"].gt(0).all()
    # The encoder's gradient bytes, not the built-in model's.
    from lmstudy.measure.factory import build_model
    from lmstudy.model_choice import ModelChoice

    spec = spec_fields("ddp", model=MODEL)
    dims = {k: spec[k] for k in ("vocab_size", "d_model", "d_ff", "num_layers", "num_heads")}
    built = build_model(ModelChoice.coerce(MODEL), dims, spec["context_length"])
    assert set(rows["gradient_bytes"]) == {sum(p.numel() * 4 for p in built.parameters())}


def test_the_sharding_job_shards_the_users_models_state(tmp_path):
    _, rows = _run_job("sharding", tmp_path, MODEL)
    assert set(rows["model"]) == {NAME}
    after = rows[rows["phase"] == "after_step"].groupby("sharded")["state_bytes"].max()
    params = rows["params_bytes"].iloc[0]
    assert after[False] >= 2 * params  # AdamW's two fp32 moments of every parameter (and its steps)
    assert after[True] < after[False]


@pytest.mark.parametrize("job", ["ddp", "sharding"])
def test_the_users_factory_runs_only_in_the_spawned_ranks(job, tmp_path):
    """tests/test_forking_parent.py's rule for the spawned ranks: neither the job's process nor a
    model's process forked from it imports or calls the user's factory; each of the 2 ranks does."""
    record = tmp_path / "pids"
    recorder = {**MODEL, "factory": "tests/fixtures/models/pid_recording_lm.py:build", "name": "pid-recorder"}
    fewer = {"versions": ["flat", "ddp"]} if job == "ddp" else {}  # where they run, not what: two do
    job_pid, rows = _run_job(job, tmp_path, recorder, {"LMSTUDY_TEST_PID_FILE": str(record)}, **fewer)
    events = [(line.split()[0], int(line.split()[1])) for line in record.read_text().splitlines()]
    imported = [pid for event, pid in events if event == "import"]
    assert len(imported) == len(set(imported)) == 2, events  # once in each rank, nowhere else
    assert {pid for _, pid in events} == set(imported) and job_pid not in imported
    assert set(rows["model"]) == {"pid-recorder"}


# The dry run starts Snakemake on the workflow: the unit loop leaves it out (tests/conftest.py).
@pytest.mark.workflow
def test_a_dry_run_plans_the_distributed_jobs_with_the_users_model(tmp_path):
    workdir = new_workdir(tmp_path)
    model = f"model={{factory: '{FACTORY}', name: {NAME}}}"
    out = snakemake(workdir, "-n", "-p", "--config", "preset=smoke", model).stdout
    for job, rule in (("ddp", "train_ddp"), ("sharding", "shard_optimizer")):
        commands = [line for line in out.splitlines() if f"lmstudy_gpu measure {job} " in line]
        assert commands and f"rule {rule}:" in out, out[-3000:]
        for command in commands:
            spec = json.loads(shlex.split(command.split(" --spec ", 1)[1])[0])
            assert spec["model"]["factory"] == FACTORY and spec["model"]["name"] == NAME
    assert (REPO / FACTORY.split(":")[0]).is_file()


@pytest.mark.parametrize("name", ["ddp", "sharding"])
def test_the_sections_say_which_model_trained(tmp_path, name):
    """Rows of the user's model (a real CPU run's, tests/fixtures/distributed/, labelled as such a run
    labels them): the method names it as the user's, the tables lead with it."""
    from lmstudy.sections.ddp import section as ddp
    from lmstudy.sections.sharding import section as sharding

    contract = {"ddp": ddp.SECTION, "sharding": sharding.SECTION}[name]
    product = tmp_path / contract.products[name]
    product.parent.mkdir(parents=True)
    rows = pd.read_csv(REPO / "tests/fixtures/distributed" / f"{name}.csv").assign(model=NAME)
    rows.to_csv(product, index=False)
    built = contract.build(tmp_path, tmp_path / "figures")
    method = contract.prose("method", **method_values(rows))
    assert f"Your own model, {NAME} (config model:" in method and "built-in" not in method
    tables = [b.frame for b in built.blocks if hasattr(b, "frame")]
    assert tables and all(list(t["model"]) == [NAME] * len(t) for t in tables)
