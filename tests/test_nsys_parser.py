"""The kernel table of real H200 nsys exports, checked against nsys's own reports.

Fixtures (tests/fixtures/gpu/README.md says how they were made): a 2-layer
model profiled for 2 steps with `nsys profile --capture-range=cudaProfilerApi`,
exported to SQLite, and the `nvtx_kern_sum` and `cuda_gpu_kern_sum` CSVs
that `nsys stats` printed for the same exports.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse.nsys.events import kernel_table, range_table
from lmstudy.analyse.nsys.sqlite import nsys_version_of, read_events
from lmstudy.errors import UserError

GPU = Path(__file__).parent / "fixtures" / "gpu"
REPO = Path(__file__).resolve().parent.parent
EXPORTS = ["nsys_train_fp32", "nsys_forward_fp32", "nsys_train_bf16", "nsys_train_bf16_sdpa"]
TRAIN = [e for e in EXPORTS if "train" in e]


def table(name: str) -> pd.DataFrame:
    return kernel_table(read_events(GPU / f"{name}.sqlite"))


def nvtx_sum(name: str) -> pd.DataFrame:
    frame = pd.read_csv(GPU / f"{name}_nvtx_kern_sum.csv")
    frame["NVTX Range"] = frame["NVTX Range"].fillna("")
    return frame


def inclusive(kernels: pd.DataFrame, name: str) -> pd.DataFrame:
    """Per kernel, the work of range `name` and every range inside it."""
    inside = kernels[kernels["path"].str.split("/").map(lambda parts: name in parts)]
    return inside.groupby("kernel")[["instances", "total_ns"]].sum()


@pytest.mark.parametrize("name", EXPORTS)
def test_every_kernel_total_matches_cuda_gpu_kern_sum(name):
    kernels = table(name)
    ours = kernels[kernels["kind"] == "kernel"].groupby("kernel")[["instances", "total_ns"]].sum()
    theirs = pd.read_csv(GPU / f"{name}_cuda_gpu_kern_sum.csv").set_index("Name")
    assert sorted(ours.index) == sorted(theirs.index)
    assert (ours["total_ns"] == theirs.loc[ours.index, "Total Time (ns)"]).all()
    assert (ours["instances"] == theirs.loc[ours.index, "Instances"]).all()


@pytest.mark.parametrize("name", EXPORTS)
def test_one_row_per_range_and_kernel(name):
    kernels = table(name)
    assert not kernels.duplicated(["range", "kernel"]).any()
    assert {"range", "kernel", "category", "instances", "total_ns"} <= set(kernels.columns)
    # Range names as the program wrote them: no "lmstudy:" domain prefix.
    assert not kernels["range"].str.contains(":").any()


@pytest.mark.parametrize("name", EXPORTS)
def test_main_thread_ranges_match_nvtx_kern_sum(name):
    """Each lmstudy range's own-thread kernels, its sub-ranges' included, are nsys's."""
    kernels = table(name)
    own = kernels.assign(
        instances=kernels["instances"] - kernels["adopted_instances"],
        total_ns=kernels["total_ns"] - kernels["adopted_ns"],
    )
    own = own[own["kind"] == "kernel"]
    theirs = nvtx_sum(name)
    theirs = theirs[theirs["NVTX Range"].str.startswith("lmstudy:")]
    assert len(theirs["NVTX Range"].unique()) >= 2
    for range_name, rows in theirs.groupby("NVTX Range"):
        expected = rows.set_index("Kernel Name")[["Kern Inst", "Total Time (ns)"]]
        got = inclusive(own, range_name.split(":", 1)[1])
        got = got[got["instances"] > 0]
        assert sorted(got.index) == sorted(expected.index), range_name
        assert (got["total_ns"] == expected.loc[got.index, "Total Time (ns)"]).all(), range_name
        assert (got["instances"] == expected.loc[got.index, "Kern Inst"]).all(), range_name


@pytest.mark.parametrize("name", TRAIN)
def test_autograd_thread_kernels_land_in_backward(name):
    """nvtx_kern_sum leaves autograd's kernels outside every lmstudy range; ours are in backward."""
    kernels = table(name)
    theirs = nvtx_sum(name)
    main_tid = theirs[theirs["NVTX Range"] == "lmstudy:step"]["TID"].iloc[0]
    other_thread = theirs[theirs["TID"] != main_tid]
    assert len(other_thread) > 0
    # CCCL's own range on that thread (a sort in the embedding's backward) is not the program's.
    assert set(other_thread["NVTX Range"]) <= {"", "CCCL:cub::DeviceRadixSort"}
    backward = kernels[(kernels["range"] == "backward") & (kernels["kind"] == "kernel")]
    assert backward["adopted_ns"].sum() == other_thread["Total Time (ns)"].sum()
    assert backward["adopted_instances"].sum() == other_thread["Kern Inst"].sum()
    main_backward = theirs[theirs["NVTX Range"] == "lmstudy:backward"]["Total Time (ns)"].sum()
    assert backward["total_ns"].sum() == main_backward + other_thread["Total Time (ns)"].sum()
    # Nothing is left outside the program's ranges, and only backward adopts.
    assert (kernels["range"] != "").all()
    assert kernels[kernels["range"] != "backward"]["adopted_ns"].sum() == 0


def test_forward_profile_has_no_backward_or_optimizer():
    kernels = table("nsys_forward_fp32")
    assert set(kernels["phase"]) == {"forward"}
    assert set(kernels["range"]) == {
        "forward",
        "computing attention scores",
        "computing softmax",
        "final matmul",
    }


def test_attention_ranges_hold_their_kernels():
    kernels = table("nsys_train_fp32")
    softmax = kernels[kernels["range"] == "computing softmax"]
    assert set(softmax["category"]) == {"softmax"}
    scores = kernels[kernels["range"] == "computing attention scores"]
    assert "GEMM" in set(scores["category"])


def test_sdpa_profile_has_no_naive_attention_ranges():
    kernels = table("nsys_train_bf16_sdpa")
    assert "computing softmax" not in set(kernels["range"])
    assert (kernels["category"] == "other").any()  # the fused attention kernels


def test_range_table_counts_instances_and_projects_gpu_time():
    ranges = range_table(read_events(GPU / "nsys_train_fp32.sqlite")).set_index("range")
    assert ranges.loc["step", "instances"] == 2  # two profiled steps; warm-up not captured
    assert ranges.loc["computing softmax", "instances"] == 4  # 2 layers x 2 steps
    # A range's GPU work includes its sub-ranges'; the step holds all of it.
    kernels = table("nsys_train_fp32")
    assert ranges.loc["step", "gpu_ns"] == kernels["total_ns"].sum()
    parts = ranges.loc[["forward", "backward", "optimizer"], "gpu_ns"].sum()
    assert parts == ranges.loc["step", "gpu_ns"]
    assert (ranges["gpu_span_ns"] >= ranges["gpu_ns"] // ranges["instances"]).all()


def test_export_version_is_read():
    assert nsys_version_of(GPU / "nsys_train_fp32.sqlite").startswith("2025.3")


def test_not_an_export_is_a_user_error(tmp_path):
    bogus = tmp_path / "x.sqlite"
    bogus.write_text("not a database")
    with pytest.raises(UserError, match="not an nsys SQLite export"):
        read_events(bogus)


def test_cli_writes_the_kernel_and_range_tables_nsys_agrees_with(tmp_path):
    out = tmp_path / "kernels.csv"
    done = subprocess.run(
        [
            sys.executable,
            "-m", "lmstudy", "nsys_kernels",
            str(GPU / "nsys_train_bf16.sqlite"),
            "--out",
            str(out),
            "--ranges",
            str(tmp_path / "ranges.csv"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    written = pd.read_csv(out)
    assert written["total_ns"].sum() == table("nsys_train_bf16")["total_ns"].sum()
    ranges = pd.read_csv(tmp_path / "ranges.csv").set_index("range")
    # The step holds every GPU activity of the kernel table (copies included).
    assert ranges.loc["step", ["gpu_ns", "kernels"]].tolist() == [
        written["total_ns"].sum(), written["instances"].sum()]
    # Each range as nsys's nvtx_kern_sum has it: as many calls, and the kernels its own thread
    # launched, once ours take away the copies and the kernels adopted from autograd's thread.
    theirs = nvtx_sum("nsys_train_bf16")
    theirs = theirs[theirs["NVTX Range"].str.startswith("lmstudy:")]
    theirs = theirs.assign(range=theirs["NVTX Range"].str.removeprefix("lmstudy:")).groupby("range").agg(
        instances=("NVTX Inst", "max"), kernels=("Kern Inst", "sum"), gpu_ns=("Total Time (ns)", "sum"))
    assert sorted(ranges.index) == sorted(theirs.index)
    assert ranges["instances"].to_dict() == theirs["instances"].to_dict()
    is_kernel = written["kind"] == "kernel"
    not_theirs = written.assign(
        kernels=written["instances"].where(~is_kernel, written["adopted_instances"]),
        gpu_ns=written["total_ns"].where(~is_kernel, written["adopted_ns"]))
    for name in ranges.index:
        inside = not_theirs[not_theirs["path"].str.split("/").map(lambda parts, name=name: name in parts)]
        ours = ranges.loc[name, ["kernels", "gpu_ns"]] - inside[["kernels", "gpu_ns"]].sum()
        assert ours.tolist() == theirs.loc[name, ["kernels", "gpu_ns"]].tolist(), name
    assert not_theirs["gpu_ns"].sum() > 0  # the export has both, so taking them away is tested too


def test_cli_names_the_fix_for_a_missing_report(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy", "nsys_kernels", "missing.nsys-rep", "--out", "k.csv"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
