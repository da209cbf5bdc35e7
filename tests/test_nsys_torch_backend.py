"""The portable backend: torch.profiler on a CPU, read into the same kernel table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lmstudy.analyse.nsys import torch_trace
from lmstudy.analyse.nsys.events import KERNEL_TABLE_COLUMNS, kernel_table, range_table
from lmstudy.measure.nsys.capture import ProfileSpec
from lmstudy.measure.nsys.job import nsys_command, run_job

TINY = dict(
    size="tiny",
    d_model=32,
    d_ff=64,
    num_layers=2,
    num_heads=2,
    context_length=16,
    precision="fp32",
    batch_size=2,
    vocab_size=64,
    warmup_steps=1,
    device="cpu",
    backend="torch",
)


@pytest.fixture(scope="module")
def train_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    record = run_job(ProfileSpec(pass_name="train_step", profiled_steps=2, **TINY), out)
    return out, record


def test_cpu_profile_has_the_programs_ranges(train_job):
    out, record = train_job
    assert record["status"] == "ok"
    kernels = pd.read_csv(out / "kernels.csv").fillna({"range": ""})
    assert list(kernels.columns[: len(KERNEL_TABLE_COLUMNS)]) == KERNEL_TABLE_COLUMNS
    assert {"forward", "backward", "optimizer", "computing softmax"} <= set(kernels["range"])
    # PyTorch's own record_function ranges are left out, like other NVTX domains.
    assert not kernels["range"].str.startswith("Optimizer.").any()
    assert not kernels.duplicated(["range", "kernel"]).any()
    # Operators stand in for kernels: matrix products are GEMM, softmax is softmax.
    forward = kernels[kernels["phase"] == "forward"]
    assert "aten::mm" in set(forward[forward["category"] == "GEMM"]["kernel"])
    softmax = kernels[kernels["range"] == "computing softmax"]
    assert "softmax" in set(softmax["category"])
    # Every row carries the configuration and the environment.
    assert set(kernels["size"]) == {"tiny"} and set(kernels["backend"]) == {"torch"}
    assert kernels["torch"].notna().all()


def test_operator_self_times_add_up_to_the_step(train_job):
    out, _ = train_job
    events = torch_trace.read_events(out / "profile" / "trace.json.gz")
    ranges = range_table(events).set_index("range")
    assert ranges.loc["step", "instances"] == 2  # warm-up is outside the profile
    # Self times never exceed the wall time of the range that holds them.
    assert ranges.loc["step", "gpu_ns"] <= ranges.loc["step", "cpu_ns"]
    assert ranges.loc["step", "gpu_ns"] == kernel_table(events)["total_ns"].sum()


def test_forward_profile(tmp_path):
    record = run_job(ProfileSpec(pass_name="forward", profiled_steps=1, **TINY), tmp_path)
    kernels = pd.read_csv(tmp_path / "kernels.csv")
    assert record["status"] == "ok"
    assert set(kernels["phase"]) == {"forward"}


def test_out_of_memory_is_a_record_not_a_crash(tmp_path):
    spec = ProfileSpec(pass_name="forward", profiled_steps=1, **{**TINY, "d_ff": 1 << 32, "num_layers": 1})
    record = run_job(spec, tmp_path)
    assert record["status"] == "OOM"
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "OOM"
    assert pd.read_csv(tmp_path / "kernels.csv").empty
    assert record["files"] == []


def test_nsys_command_captures_only_the_profiler_range(tmp_path):
    spec = ProfileSpec(pass_name="train_step", **{**TINY, "backend": "nsys", "device": "cuda"})
    command = nsys_command("/opt/nsys", spec, tmp_path / "profile", tmp_path / "p.json")
    assert command[:2] == ["/opt/nsys", "profile"]
    assert "--capture-range=cudaProfilerApi" in command
    assert "cuda,nvtx" in command
    assert command[command.index("--pass") + 1] == "train_step"


def test_backend_comparison_flags_a_range_that_differs():
    from pathlib import Path

    from lmstudy.analyse.nsys.compare import compare_ranges
    from lmstudy.analyse.nsys.sqlite import read_events

    export = Path(__file__).parent / "fixtures" / "gpu" / "nsys_train_fp32.sqlite"
    ranges = range_table(read_events(export)).assign(profiled_steps=2)
    other = ranges.astype({"gpu_ns": float})
    other.loc[other["range"] == "optimizer", "gpu_ns"] *= 1.10
    table = compare_ranges(ranges, other).set_index("path")
    assert not table.loc["step/optimizer", "within_tolerance"]
    assert table.drop(index="step/optimizer")["within_tolerance"].all()
    assert table.loc["step/optimizer", "relative_difference"] == pytest.approx(0.10)
