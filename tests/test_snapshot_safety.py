"""A memory snapshot is data: nothing in it runs, and a malformed one is named (issue 13, items 1 and 11)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from lmstudy.analyse.memory import plain_pickle, snapshot
from lmstudy.errors import UserError

from .conftest import FIXTURES, REPO

GPU = FIXTURES / "gpu"
SNAPSHOTS = sorted(GPU.glob("snapshot_*.pickle"))


class RunsACommand:
    """Unpickling this runs a shell command, as an attacker's file would."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def summarize(path, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts/memory_summary.py"), str(path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )


def one_sentence_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_snapshot_that_would_run_a_command_runs_nothing_and_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]], "x": RunsACommand(marker)}))
    line = one_sentence_error(summarize(evil, tmp_path))
    assert not marker.exists()
    assert str(evil) in line and "system" in line and "only plain data" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("payload", [{1, 2}, bytearray(b"x"), [{"a": frozenset()}]])
def test_containers_other_than_plain_ones_are_refused(payload):
    with pytest.raises(plain_pickle.NotPlainData):
        plain_pickle.loads(pickle.dumps({"segments": [], "device_traces": [], "x": payload}))


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_the_real_snapshots_still_load_unchanged(path):
    assert plain_pickle.load(path) == pickle.loads(path.read_bytes())
    assert snapshot.load(path).allocations


def real_snapshot() -> dict:
    return plain_pickle.load(GPU / "snapshot_forward_fp32.pickle")


def test_a_snapshot_of_the_right_keys_but_wrong_types_names_the_value(tmp_path):
    data = real_snapshot()
    data["device_traces"][0][3]["size"] = "1024"
    bad = tmp_path / "typed.pickle"
    bad.write_bytes(pickle.dumps(data))
    line = one_sentence_error(summarize(bad, tmp_path))
    assert "device_traces.0.3.size" in line and "'1024' is not of type 'integer'" in line


def test_segments_that_are_not_a_list_are_named(tmp_path):
    bad = tmp_path / "segments.pickle"
    bad.write_bytes(pickle.dumps({"segments": {"a": 1}, "device_traces": []}))
    assert "segments:" in one_sentence_error(summarize(bad, tmp_path))


@pytest.mark.parametrize("traces", [[], [[]]])
def test_an_empty_snapshot_is_refused_instead_of_a_zero_peak(tmp_path, traces):
    empty = tmp_path / "empty.pickle"
    empty.write_bytes(pickle.dumps({"segments": [], "device_traces": traces}))
    line = one_sentence_error(summarize(empty, tmp_path))
    assert "records no memory" in line and "peak 0.0" not in line


def test_a_truncated_snapshot_is_named(tmp_path):
    data = (GPU / "snapshot_forward_fp32.pickle").read_bytes()
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="not a readable memory snapshot"):
        snapshot.load_pickle(cut)
