"""A user's model costs what the built-in one costs (lmstudy.measure.model_process, count_on_device).

Its code (the factory's module, transformers) is imported once a job, in the
model's process, where that leaves CUDA untouched, and in each measuring
process where it does not; its FLOPs are counted on the meta device, or on
the device after measuring where its forward cannot run there, never by a
build on the host. Real jobs, run as the workflow runs them, on factories
that write down the processes that import them (tests/fixtures/models).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from lmstudy.measure.factory import CountOnDevice, count_on_meta
from lmstudy.model_choice import ModelChoice

from .conftest import REPO
from .specs import spec_fields

LLAMA = "tests/fixtures/models/llama_recording.py:build"
RECORDER = "tests/fixtures/models/pid_recording_lm.py:build"
TWO_PROCESSES = {"min_processes": 2, "max_processes": 2}
DIMS = {"vocab_size": 64, "d_model": 32, "d_ff": 64, "num_layers": 2, "num_heads": 4}


def _timing_job(factory: str, tmp_path, extra_env=None):
    spec = spec_fields(
        "timing",
        model={"factory": factory, "name": "mine", "range_depth": None, "extra": []},
        variant="naive",
        precision="fp32",
    )
    spec["noise"] = {**spec["noise"], **TWO_PROCESSES}
    record = tmp_path / "pids"
    env = {**os.environ, "LMSTUDY_TEST_PID_FILE": str(record), **(extra_env or {})}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lmstudy",
            "measure",
            "timing",
            "--spec",
            json.dumps(spec),
            "--out",
            str(tmp_path / "rows.csv"),
            "--phases",
            str(tmp_path / "phases.json"),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output[-4000:]
    pids = collections.defaultdict(set)
    for line in record.read_text().splitlines():
        event, pid = line.split()
        pids[event].add(int(pid))
    phases = json.loads((tmp_path / "phases.json").read_text())["phases"]
    return process.pid, pids, pd.read_csv(tmp_path / "rows.csv"), phases, output


def test_a_hugging_face_model_is_imported_once_a_job_and_counted_on_the_device(tmp_path):
    pytest.importorskip("transformers")
    job_pid, pids, rows, phases, _ = _timing_job(LLAMA, tmp_path)
    # Before: the counting child and each of the six measuring processes imported transformers (7).
    assert len(pids["transformers"]) == 1 and len(pids["import"]) == 1, dict(pids)
    assert job_pid not in pids["import"] | pids["call"]
    assert (rows["status"] == "ok").all()
    # Its forward reads a value (.item()), so not on the meta device: counted on the device, as
    # FlopCounterMode counts the model built on the host (what the count was before).
    assert rows["flops_counted_by"].str.contains("on the device").all()
    assert rows["attention_ran"].eq("naive: matrix products and a softmax").all()  # eager attention
    choice = ModelChoice(factory=LLAMA, name="mine")
    spec = spec_fields("timing")
    with pytest.raises(CountOnDevice):
        count_on_meta(choice, {k: spec[k] for k in DIMS}, spec["context_length"], spec["batch_size"])
    from lmstudy.measure.factory import build_model, count_flops

    model = build_model(choice, {k: spec[k] for k in DIMS}, spec["context_length"])
    on_host = count_flops(model, spec["batch_size"], spec["context_length"], spec["vocab_size"], LLAMA)
    for pass_name, flops in on_host.items():
        assert (rows.loc[rows["pass"] == pass_name, "flops_per_step"] == flops).all()
    # The cost section shows the model's imports and its counting apart from the rest.
    assert phases["model_imports"] > 0 and phases["count"] > 0


def test_a_model_counted_on_the_meta_device_needs_no_count_on_the_device():
    counted = count_on_meta(ModelChoice(factory=RECORDER, name="mine"), DIMS, 16, 2)
    assert counted["parameters"] == 64 * 32 + 32 * 32 + 32 * 64
    assert counted["forward"] == 2 * 2 * 16 * (32 * 32 + 32 * 64)
    assert counted["matmul_parameters"] == 32 * 32 + 32 * 64  # the N of 6N: the embedding left out


def test_the_parameters_in_matrix_products_leave_out_positions_norms_and_biases_and_count_a_tied_head_once():
    counted = count_on_meta(ModelChoice(factory="tests/fixtures/models/encoder_lm.py:build"), DIMS, 16, 2)
    positions, norms = 16 * 32, 2 * 2 * 2 * 32  # learned positions; two LayerNorms a layer, weight and bias
    biases = 2 * (3 * 32 + 32 + 64 + 32)  # attention's in and out projections, the feed-forward's two
    assert counted["matmul_parameters"] == counted["parameters"] - positions - norms - biases
    # the LM head is the embedding's matrix (tied): counted once, as the head's


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler to build the stand-in driver")
def test_a_model_whose_import_starts_cuda_is_imported_in_each_measuring_process_instead(tmp_path):
    """The model's process sees the driver started and leaves the job to the job's own process, which
    never imported the model: each measuring process imports it afresh, and every row is measured."""
    library = tmp_path / "libcuda.so.1"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(library), str(REPO / "tests/fixtures/fake_driver/libcuda.c")],
        check=True,
    )
    job_pid, pids, rows, phases, output = _timing_job(
        RECORDER, tmp_path, {"LMSTUDY_TEST_FAKE_CUINIT": str(library)}
    )
    assert "started CUDA when imported (the CUDA driver has been initialised (cuInit))" in output
    assert job_pid not in pids["import"] | pids["call"]
    # the model's process, the counting child and six measuring processes
    assert len(pids["import"]) == 8, dict(pids)
    assert (rows["status"] == "ok").all() and rows["flops_per_step"].notna().all()


def test_without_a_fake_driver_the_same_model_is_imported_once(tmp_path):
    job_pid, pids, rows, _, output = _timing_job(RECORDER, tmp_path)
    assert len(pids["import"]) == 1 and job_pid not in pids["import"]
    assert "started CUDA" not in output
    assert rows["flops_counted_by"].eq("FlopCounterMode").all()


@pytest.mark.parametrize(
    ("factory", "attention", "ran"),
    [
        # nn.TransformerEncoderLayer: PyTorch's SDPA inside, though the study builds it as "naive"
        ("tests/fixtures/models/encoder_lm.py:build", "naive", "SDPA, flash kernel"),
        ("lmstudy.measure.model:build", "naive", "naive: matrix products and a softmax"),
        ("lmstudy.measure.model:build", "sdpa", "SDPA, flash kernel"),
        (RECORDER, "naive", "none found (no attention kernel, no softmax)"),
    ],
)
def test_the_attention_a_model_runs_is_read_from_the_operators_it_dispatches(factory, attention, ran):
    import torch

    from lmstudy.measure.factory import attention_run, build_model

    model = build_model(ModelChoice(factory=factory), DIMS, 16, attention)
    assert attention_run(model, torch.zeros(2, 16, dtype=torch.long)) == ran
