"""One capture of both passes, split by pass: a real H100 export checked against nsys's own sums.

The fixture (tests/fixtures/gpu/README.md) is section 2's own program,
lmstudy.measure.nsys.program (then scripts/profile_model.py), run under `nsys profile` on the tiny model: the
forward's and the training step's warm-ups, then one capture in which each
pass's two profiled steps run inside a range "profiled pass <pass>".
`nsys stats` printed the nvtx_kern_sum and cuda_gpu_kern_sum CSVs of the
same export.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse.nsys.events import Events, kernel_table, range_table, split_by_pass
from lmstudy.analyse.nsys.sqlite import read_events
from lmstudy.errors import UserError
from lmstudy.measure.nsys.job import write_passes

GPU = Path(__file__).parent / "fixtures" / "gpu"
REPO = Path(__file__).resolve().parent.parent
NAME = "nsys_passes_fp32"


@pytest.fixture(scope="module")
def events():
    return read_events(GPU / f"{NAME}.sqlite")


@pytest.fixture(scope="module")
def passes(events):
    return split_by_pass(events)


def nvtx_sum() -> pd.DataFrame:
    frame = pd.read_csv(GPU / f"{NAME}_nvtx_kern_sum.csv")
    return frame.assign(**{"NVTX Range": frame["NVTX Range"].fillna("")})


def per_kernel(kernels: pd.DataFrame) -> pd.DataFrame:
    return kernels[kernels["kind"] == "kernel"].groupby("kernel")[["instances", "total_ns"]].sum()


def test_the_capture_splits_into_its_two_passes(passes):
    assert sorted(passes) == ["forward", "train_step"]
    for part in passes.values():
        ranges = range_table(part).set_index("path")
        assert ranges.loc["step", "instances"] == 2  # its two profiled steps, no warm-up
        assert not ranges.index.str.contains("profiled pass").any()
    assert "step/backward" not in range_table(passes["forward"])["path"].tolist()
    assert {"forward", "backward", "optimizer"} <= set(kernel_table(passes["train_step"])["phase"])


@pytest.mark.parametrize("name", ["forward", "train_step"])
def test_each_pass_has_what_nsys_puts_in_its_range(passes, name):
    """The kernels launched from the program's thread inside the pass's range are nsys's, exactly."""
    kernels = kernel_table(passes[name])
    own = kernels.assign(
        instances=kernels["instances"] - kernels["adopted_instances"],
        total_ns=kernels["total_ns"] - kernels["adopted_ns"],
    )
    got = per_kernel(own)
    got = got[got["instances"] > 0]
    theirs = nvtx_sum()
    expected = theirs[theirs["NVTX Range"] == f"lmstudy:profiled pass {name}"].set_index("Kernel Name")
    assert sorted(got.index) == sorted(expected.index)
    assert (got["total_ns"] == expected.loc[got.index, "Total Time (ns)"]).all()
    assert (got["instances"] == expected.loc[got.index, "Kern Inst"]).all()


def test_autograd_thread_work_goes_to_the_training_step_only(passes):
    theirs = nvtx_sum()
    main_tid = theirs[theirs["NVTX Range"] == "lmstudy:step"]["TID"].iloc[0]
    other_thread = theirs[theirs["TID"] != main_tid]
    assert len(other_thread) > 0
    train = kernel_table(passes["train_step"])
    train = train[train["kind"] == "kernel"]
    assert train["adopted_ns"].sum() == other_thread["Total Time (ns)"].sum()
    assert kernel_table(passes["forward"])["adopted_ns"].sum() == 0


def test_the_passes_together_hold_every_kernel_of_the_capture_once(passes):
    both = per_kernel(pd.concat([kernel_table(part) for part in passes.values()]))
    theirs = pd.read_csv(GPU / f"{NAME}_cuda_gpu_kern_sum.csv").set_index("Name")
    assert sorted(both.index) == sorted(theirs.index)
    assert (both["total_ns"] == theirs.loc[both.index, "Total Time (ns)"]).all()
    assert (both["instances"] == theirs.loc[both.index, "Instances"]).all()


def test_each_pass_gets_its_tables_and_record(events, tmp_path):
    records = json.loads((GPU / f"{NAME}_program.json").read_text())["passes"]
    report = tmp_path / "profile" / "profile.nsys-rep"
    write_passes(tmp_path, records, events, [report])
    for name in ("forward", "train_step"):
        kernels = pd.read_csv(tmp_path / name / "kernels.csv")
        record = json.loads((tmp_path / name / "run.json").read_text())
        assert set(kernels["pass"]) == {name} and record["pass"] == name
        assert set(kernels["gpu"]) == {"NVIDIA H100 80GB HBM3"}
        assert record["files"] == ["../profile/profile.nsys-rep"]
    forward = pd.read_csv(tmp_path / "forward" / "kernels.csv")
    assert set(forward["phase"]) == {"forward"}


def test_a_pass_that_ran_but_is_not_in_the_capture_is_an_error(events, tmp_path):
    records = json.loads((GPU / f"{NAME}_program.json").read_text())["passes"]
    unmarked = events.ranges[events.ranges["name"] != "profiled pass train_step"]
    only_forward = Events(unmarked, events.launches, events.activities)
    with pytest.raises(RuntimeError, match="no range 'profiled pass train_step' for the train_step pass"):
        write_passes(tmp_path, records, only_forward, [])


def test_work_outside_every_pass_is_said_not_silently_dropped(events, passes):
    assert all(part.note == "" for part in passes.values())  # the program leaves nothing outside
    unmarked = events.ranges[events.ranges["name"] != "profiled pass train_step"]
    forward_only = split_by_pass(Events(unmarked, events.launches, events.activities))["forward"]
    left_out = len(events.activities) - len(forward_only.activities)
    assert left_out > 0
    assert forward_only.note.startswith(f"{left_out} GPU activities of the capture lie outside every pass's")


def test_the_cli_table_of_a_section_2_profile_is_per_pass(passes, tmp_path):
    out, ranges = tmp_path / "kernels.csv", tmp_path / "ranges.csv"
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy", "nsys_kernels", str(GPU / f"{NAME}.sqlite"),
         "--out", str(out), "--ranges", str(ranges)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    written = pd.read_csv(out)
    for name, part in passes.items():
        rows = written[written["pass"] == name]
        assert rows["total_ns"].sum() == kernel_table(part)["total_ns"].sum()
    # The inference forward and the training step's forward stay apart.
    forward = written[written["phase"] == "forward"]
    assert set(forward["pass"]) == {"forward", "train_step"}
    assert not pd.read_csv(ranges)["path"].str.contains("profiled pass").any()


def test_a_profile_with_a_pass_twice_is_one_sentence(events, tmp_path):
    twice = events.ranges[events.ranges["name"] == "profiled pass forward"]
    doubled = Events(pd.concat([events.ranges, twice]), events.launches, events.activities)
    with pytest.raises(UserError, match="two ranges 'profiled pass forward'.*profile again"):
        split_by_pass(doubled)
