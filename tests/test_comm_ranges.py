"""The share of the communication the backward hides, from the ranges of both (lmstudy.measure.comm_ranges),
on two CPU processes with Gloo: naive's all-reduces all follow the backward, overlapped's start inside it."""

from __future__ import annotations

import math

import pytest

from lmstudy.measure import comm_ranges

torch = pytest.importorskip("torch")

SPEC = {
    "vocab_size": 64,
    "context_length": 16,
    "d_model": 32,
    "d_ff": 64,
    "num_layers": 4,
    "num_heads": 2,
    "batch_size": 2,
    "warmup_steps": 1,
    "timed_steps": 3,
    "versions": ["none", "naive", "overlapped", "ddp"],
    "bucket_mb": [],
}


def test_ranges_merge_and_clip_to_the_window():
    ranges = [(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]
    assert comm_ranges.union(ranges) == [(0.0, 3.0), (5.0, 6.0)]
    assert comm_ranges.length(ranges) == pytest.approx(4.0)  # overlapping ranges count once
    assert comm_ranges.inside(ranges, (2.5, 5.5)) == pytest.approx(1.0)
    assert comm_ranges.inside(ranges, (7.0, 8.0)) == 0.0


@pytest.fixture(scope="module")
def rows():
    import pandas as pd

    from lmstudy.measure.distributed import run_group
    from lmstudy.measure.distributed_bench import ddp_rank

    ranks = run_group(ddp_rank, 2, "cpu", SPEC, "the ranges check")
    return pd.DataFrame([row for rank in ranks for row in rank["rows"]])


def test_naive_communicates_after_the_backward_and_overlapped_inside_it(rows):
    by = rows.groupby("version")
    assert by["comm_in_backward_s"].max()["naive"] == 0.0
    assert by["comm_span_s"].min()["naive"] > 0
    assert by["comm_in_backward_s"].median()["overlapped"] > 0
    ranged = rows.dropna(subset=["comm_span_s"])
    assert (ranged["comm_in_backward_s"] <= ranged["comm_span_s"] + 1e-9).all()
    assert rows.loc[rows["version"] == "none", "comm_span_s"].isna().all()  # nothing to range
    # DDP's backward() waits for its all-reduces; its backward's range ends at the last gradient, so
    # this tiny model's one bucket (issued as that gradient lands) counts as not hidden.
    ddp = rows[rows["version"] == "ddp"]
    assert (ddp["backward_s"] > 0).all() and not math.isnan(ddp["comm_span_s"].iloc[0])
    assert (ddp["comm_in_backward_s"] < ddp["comm_span_s"]).all()
