"""A memory snapshot is data: nothing in it runs, and a malformed one is named (issue 13, items 1 and 11)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from lmstudy.analyse.memory import plain_pickle, snapshot
from lmstudy.errors import UserError

from .conftest import FIXTURES

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
        [sys.executable, "-m", "lmstudy", "memory_summary", "--top", "10",
         str(path), "--out", str(tmp_path / "out")],
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


# Issue 23, items 3, 7, 13 and 17: snapshots that expand, nest, or hold what no allocator writes.
def test_a_small_snapshot_of_shared_references_is_refused_within_seconds(tmp_path):
    event = {"action": "alloc", "addr": 4096, "size": 512, "time_us": 1, "frames": []}
    trace = [event] * 100_000  # one event, referred to 100,000 times: a few hundred KB
    bomb = tmp_path / "bomb.pickle"
    bomb.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace] * 10_000}))
    assert bomb.stat().st_size < 1_000_000  # yet a billion events
    line = one_sentence_error(summarize(bomb, tmp_path))
    assert str(bomb) in line and "far more than its size holds" in line


def test_a_snapshot_nested_a_million_levels_deep_is_refused(tmp_path):
    def text(s: str) -> bytes:  # BINUNICODE
        return b"X" + len(s).to_bytes(4, "little") + s.encode()

    # Written opcode by opcode (pickle.dumps itself recurses): a million empty lists, each
    # appended to the one below.
    depth = 1_000_000
    nested = b"]" * depth + b"a" * (depth - 1)
    deep = tmp_path / "deep.pickle"
    deep.write_bytes(
        b"\x80\x02}" + text("segments") + b"]s" + text("device_traces") + b"]]as" + text("x") + nested + b"s."
    )
    line = one_sentence_error(summarize(deep, tmp_path))
    assert "nests more than 32 levels deep" in line


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: d["device_traces"][0][3].update(size=2**70), "device_traces.0.3.size"),
    (lambda d: d["segments"][0].update(total_size=-1), "segments.0.total_size"),
    (lambda d: d["device_traces"][0][3].update(time_us=float("nan")), "device_traces.0.3.time_us: nan is"),
    (lambda d: d["device_traces"][0][3].update(time_us=float("inf")), "device_traces.0.3.time_us: inf is"),
])
def test_values_no_allocator_writes_are_named(tmp_path, edit, named):
    data = real_snapshot()
    edit(data)
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(pickle.dumps(data))
    line = one_sentence_error(summarize(bad, tmp_path))
    assert named in line


def test_one_address_allocated_twice_without_a_free_is_refused(tmp_path):
    data = real_snapshot()
    trace = data["device_traces"][0]
    first = next(i for i, e in enumerate(trace) if e["action"] == "alloc")
    trace.insert(first + 1, dict(trace[first]))  # the same block handed out again while live
    bad = tmp_path / "twice.pickle"
    bad.write_bytes(pickle.dumps(data))
    line = one_sentence_error(summarize(bad, tmp_path))
    assert f"allocates address {trace[first]['addr']:#x}" in line and "without freeing it" in line


@pytest.mark.parametrize("meta", ["/etc/passwd", "list"])
def test_a_meta_file_named_by_the_user_that_is_not_one_is_not_to_be_deleted(tmp_path, meta):
    if meta == "list":
        meta = tmp_path / "list.json"
        meta.write_text("[1, 2]")
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy", "memory_summary", "--top", "10",
         str(GPU / "snapshot_forward_fp32.pickle"),
         "--out", str(tmp_path / "out"), "--meta", str(meta)],
        capture_output=True, text=True,
    )
    line = one_sentence_error(done)
    assert f"{meta} is not a snapshot job's JSON" in line and "as --meta" in line
    assert "delete" not in line
