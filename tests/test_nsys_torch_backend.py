"""The portable backend: torch.profiler on a CPU, read into the same kernel table.

One job profiles both passes in one process and one capture; each pass's
tables come from its own part of the capture.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from lmstudy.analyse.nsys import torch_trace
from lmstudy.analyse.nsys.events import KERNEL_TABLE_COLUMNS, kernel_table, range_table, split_by_pass
from lmstudy.measure.nsys import capture
from lmstudy.measure.nsys.job import nsys_command, run_job

from .specs import spec_for

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
def both_passes(tmp_path_factory):
    out = tmp_path_factory.mktemp("both")
    records = run_job(spec_for("nsys", passes=("forward", "train_step"), profiled_steps=2, **TINY), out)
    return out, records


@pytest.fixture(scope="module")
def train_job(both_passes):
    out, records = both_passes
    return out / "train_step", records["train_step"]


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


def test_operator_self_times_add_up_to_the_step(both_passes):
    out, _ = both_passes
    events = split_by_pass(torch_trace.read_events(out / "profile" / "trace.json.gz"))["train_step"]
    ranges = range_table(events).set_index("range")
    assert ranges.loc["step", "instances"] == 2  # warm-up is outside the profile
    # Self times never exceed the wall time of the range that holds them.
    assert ranges.loc["step", "gpu_ns"] <= ranges.loc["step", "cpu_ns"]
    assert ranges.loc["step", "gpu_ns"] == kernel_table(events)["total_ns"].sum()


def test_forward_part_of_the_capture(both_passes):
    out, records = both_passes
    kernels = pd.read_csv(out / "forward" / "kernels.csv")
    ranges = pd.read_csv(out / "forward" / "ranges.csv").set_index("path")
    assert records["forward"]["status"] == "ok"
    assert set(kernels["phase"]) == {"forward"} and set(kernels["pass"]) == {"forward"}
    # Its own two steps: not the training step's, not the warm-up.
    assert ranges.loc["step", "instances"] == 2 and "step/backward" not in ranges.index
    assert len(records["forward"]["captured_step_ms"]) == 2


def test_one_capture_holds_both_passes_and_nothing_else(both_passes):
    out, records = both_passes
    assert sorted(p.name for p in (out / "profile").iterdir()) == ["trace.json.gz"]
    events = torch_trace.read_events(out / "profile" / "trace.json.gz")
    steps = range_table(events).set_index("range").loc["step"]
    assert steps["instances"].sum() == 4  # 2 forward + 2 training steps, no warm-up
    parts = split_by_pass(events)
    assert sorted(parts) == ["forward", "train_step"]
    # The passes' paths read as in a capture of one pass: no marker range left in them.
    for part in parts.values():
        assert not range_table(part)["path"].str.contains("profiled pass").any()
    # Every operator of the capture belongs to one pass, none to two.
    whole = kernel_table(events)["total_ns"].sum()
    in_passes = sum(kernel_table(part)["total_ns"].sum() for part in parts.values())
    assert in_passes == pytest.approx(whole, rel=0.01)
    for name in records:
        kept = json.loads((out / name / "run.json").read_text())
        assert kept["files"] == ["../profile/trace.json.gz"] and kept["pass"] == name


def test_out_of_memory_in_the_build_is_a_record_for_every_pass(tmp_path):
    spec = spec_for("nsys", profiled_steps=1, **{**TINY, "d_ff": 1 << 32, "num_layers": 1})
    records = run_job(spec, tmp_path)
    assert {name: r["status"] for name, r in records.items()} == {"forward": "OOM", "train_step": "OOM"}
    for name in records:
        assert json.loads((tmp_path / name / "run.json").read_text())["status"] == "OOM"
        assert pd.read_csv(tmp_path / name / "kernels.csv").empty
        assert records[name]["files"] == []


def test_a_pass_out_of_memory_leaves_the_other_profiled(tmp_path, monkeypatch):
    """A training step that does not fit (2.7B at context 1024 on 80 GB) still leaves the forward profiled."""
    make_step = capture.make_step

    def training_runs_out_of_memory(work, pass_name):
        step = make_step(work, pass_name)
        if pass_name != "train_step":
            return step

        def too_big():
            step()  # the gradients and optimizer state it leaves are what must be freed
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

        return too_big

    monkeypatch.setattr(capture, "make_step", training_runs_out_of_memory)
    records = run_job(spec_for("nsys", profiled_steps=1, **TINY), tmp_path)
    assert records["train_step"]["status"] == "OOM" and "out of memory" in records["train_step"]["error"]
    assert records["forward"]["status"] == "ok"
    assert pd.read_csv(tmp_path / "train_step" / "kernels.csv").empty
    forward = pd.read_csv(tmp_path / "forward" / "kernels.csv")
    assert set(forward["phase"]) == {"forward"}


def test_a_forward_out_of_memory_keeps_the_training_steps_optimizer_state(tmp_path, monkeypatch):
    """The training step's profiled steps must not build AdamW's state anew inside the capture."""
    make_step = capture.make_step
    spec = spec_for("nsys", profiled_steps=2, **TINY)

    def forward_runs_out_of_memory_in_the_capture(work, pass_name):
        step = make_step(work, pass_name)
        if pass_name != "forward":
            return step
        calls = []

        def too_big():
            calls.append(1)
            if len(calls) > spec.warmup_steps:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
            step()

        return too_big

    monkeypatch.setattr(capture, "make_step", forward_runs_out_of_memory_in_the_capture)
    records = run_job(spec, tmp_path)
    assert records["forward"]["status"] == "OOM" and records["train_step"]["status"] == "ok"
    optimizer = pd.read_csv(tmp_path / "train_step" / "kernels.csv").query("range == 'optimizer'")
    assert len(optimizer) > 0
    # AdamW creates its moments with zeros_like on its first step only: the warm-up's.
    assert not optimizer["kernel"].str.contains("zeros_like").any()


def test_nsys_command_captures_only_the_profiler_range(tmp_path):
    command = nsys_command("/opt/nsys", tmp_path / "spec.json", tmp_path / "profile", tmp_path / "p.json")
    assert command[:2] == ["/opt/nsys", "profile"]
    assert "--capture-range=cudaProfilerApi" in command
    assert "--capture-range-end=stop" in command
    assert "cuda,nvtx" in command
    # the profiled program reads the job's own spec, as a file: no flags, no defaults of its own
    assert command[-6:] == ["-m", "lmstudy.measure.nsys.program", "--spec", str(tmp_path / "spec.json"),
                            "--record", str(tmp_path / "p.json")]


def test_passes_are_checked():
    with pytest.raises(ValueError, match="passes must be"):
        spec_for("nsys", passes=("forward", "forward"), **TINY)
    with pytest.raises(ValueError, match="passes must be"):
        spec_for("nsys", passes=("forward_backward",), **TINY)


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


def test_a_norms_backward_goes_to_the_norm_not_to_the_module_whose_range_was_open_before_it(tmp_path):
    """Autograd's wrapper of a backward node opens before the node's pre-hooks switch the module ranges
    (self_attn's backward closes, the norm's opens): placed at its node, it goes to the norm, as the
    node and its operator do. A user's model of pre-norm nn.TransformerEncoderLayer blocks
    (tests/fixtures/models/pre_norm_lm.py)."""
    from lmstudy.model_choice import ModelChoice

    model = ModelChoice(factory="tests/fixtures/models/pre_norm_lm.py:build", range_depth=4)
    run_job(spec_for("nsys", passes=("train_step",), profiled_steps=1, model=model, **TINY), tmp_path)
    kernels = pd.read_csv(tmp_path / "train_step" / "kernels.csv")
    norm = kernels[(kernels["phase"] == "backward") & kernels["kernel"].str.contains("LayerNorm|layer_norm")]
    assert len(norm) == 3 * 2 * 2  # wrapper, node and operator of each of two norms in two layers
    assert norm["range"].str.fullmatch(r"module blocks\.layers\.\d\.norm[12]").all(), norm["range"].tolist()


def _program(tmp_path, fields: dict):
    import subprocess
    import sys

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(fields))
    return subprocess.run(
        [sys.executable, "-m", "lmstudy.measure.nsys.program", "--spec", str(spec),
         "--trace", str(tmp_path / "trace.json.gz"), "--record", str(tmp_path / "record.json")],
        capture_output=True, text=True, timeout=300,
    )


def test_the_profiled_program_runs_the_jobs_own_spec(tmp_path):
    from lmstudy.measure.nsys.job import spec_dict

    fields = spec_dict(spec_for("nsys", passes=("forward",), profiled_steps=1, **{**TINY, "warmup_steps": 3}))
    done = _program(tmp_path, fields)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "record.json").read_text())["passes"]["forward"]
    # the spec's warm-up, not a default of the program's own
    assert record["status"] == "ok" and record["warmup_steps"] == 3 and record["profiled_steps"] == 1


def test_the_profiled_program_has_no_defaults_of_its_own(tmp_path):
    from lmstudy.measure.nsys.job import spec_dict

    fields = spec_dict(spec_for("nsys", **TINY))
    del fields["warmup_steps"]
    done = _program(tmp_path, fields)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: the spec lacks warmup_steps: a job takes its spec complete, as the workflow gives it; "
        "`lmstudy spec nsys ...` completes a partial one from config.yaml."
    )


def test_the_backend_answer_is_read_back_whole_or_named_as_damaged(tmp_path):
    """The profile jobs read the nsys_backend job's answer with nsys's own reader (issue 41: their code
    is nsys's, not every section's result-file checks); a damaged answer is one sentence naming it."""
    from lmstudy.errors import UserError
    from lmstudy.measure.nsys.executable import read_answer, settle_backend

    path = tmp_path / "backend.json"
    path.write_text(json.dumps(settle_backend("torch")))
    assert read_answer(path)["backend"] == "torch"
    path.write_text(json.dumps({"backend": "nsys"}))
    with pytest.raises(UserError, match=r"backend.json is damaged or not a result file \(no requested"):
        read_answer(path)
    path.write_text("{")
    with pytest.raises(UserError, match=r"not valid JSON.*rm '"):
        read_answer(path)
