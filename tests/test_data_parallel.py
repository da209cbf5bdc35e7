"""The distributed sections' training by hand (lmstudy.measure.data_parallel), on two CPU processes
with Gloo: every data-parallel version, and AdamW with its state sharded, ends with the parameters
one process training on both ranks' batches together ends with."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from lmstudy.measure import data_parallel  # noqa: E402
from lmstudy.measure.distributed import run_group  # noqa: E402
from lmstudy.measure.distributed_bench import equality_rank, single_process  # noqa: E402

SPEC = {
    "vocab_size": 32,
    "context_length": 8,
    "d_model": 16,
    "d_ff": 32,
    "num_layers": 2,
    "num_heads": 2,
    "batch_size": 2,
    "timed_steps": 3,
    "versions": list(data_parallel.VERSIONS),
    "bucket_mb": [0.001, 1],
}


@pytest.fixture(scope="module")
def trained():
    ranks = run_group(equality_rank, 2, "cpu", SPEC, "the equality check")
    return ranks, np.array(single_process(SPEC, 2))


def test_every_version_trains_as_one_process(trained):
    ranks, single = trained
    versions = [key for key in ranks[0] if key != "none"]
    assert set(versions) == {"naive", "flat", "overlapped", "bucketed-0.001", "bucketed-1", "ddp", "sharded"}
    for version in versions:
        for rank in ranks:
            np.testing.assert_allclose(rank[version], single, rtol=1e-4, atol=1e-5, err_msg=version)


def test_without_communication_the_ranks_drift_apart(trained):
    """The check can fail: a rank that trains alone on its own batches does not match."""
    ranks, single = trained
    assert not np.allclose(ranks[0]["none"], single, rtol=1e-4, atol=1e-5)
    assert not np.allclose(ranks[0]["none"], ranks[1]["none"], rtol=1e-4, atol=1e-5)


def test_buckets_follow_the_backward_and_their_cap():
    params = [torch.zeros(250_000), torch.zeros(10), torch.zeros(240_000), torch.zeros(600_000)]
    buckets = data_parallel.buckets_of(params, 1_000_000)  # 1 MB: 250,000 float32
    assert [[p.numel() for p in b] for b in buckets] == [[600_000], [240_000, 10], [250_000]]


def test_shards_balance_the_ranks():
    params = [torch.zeros(n) for n in (100, 60, 50, 10)]
    owners = data_parallel.shard_owners(params, 2)
    load = [sum(p.numel() for p, o in zip(params, owners, strict=True) if o == r) for r in range(2)]
    assert owners == [0, 1, 1, 0] and load == [110, 110]
