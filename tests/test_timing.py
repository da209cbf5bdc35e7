import json

import pytest
import torch

from lmstudy import flops, hardware
from lmstudy.stats import summarize_ms
from lmstudy.steps import build_workload, make_step
from lmstudy.timing import TimingSpec, run_job, time_steps

TINY = dict(size="t", d_model=32, d_ff=64, num_layers=1, num_heads=2, context_length=16,
            batch_size=2, vocab_size=64, device="cpu", timed_steps=3)


def test_job_rows_cover_every_pass_and_warmup():
    spec = TimingSpec(precision="fp32", warmup_steps=(0, 2), **TINY)
    rows = run_job(spec)
    got = {(r["pass"], r["warmup_steps"]) for r in rows}
    assert got == {(p, w) for p in spec.passes for w in (0, 2)}
    for row in rows:
        assert row["status"] == "ok"
        times = json.loads(row["step_times_ms"])
        assert len(times) == 3
        assert row["min_ms"] <= row["median_ms"] <= row["max_ms"]
        assert row["tokens_per_s"] == pytest.approx(2 * 16 / (row["median_ms"] / 1e3))
        assert row["torch"] == torch.__version__ and row["commit"]
        assert row["mfu"] is None  # a CPU has no datasheet peak
    cold = [r for r in rows if r["warmup_steps"] == 0]
    assert all(r["process"] == "fresh" and r["process_s"] > 0 for r in cold)


def test_out_of_memory_is_a_row_and_the_job_goes_on():
    huge = {**TINY, "d_ff": 2**34}  # a 2**39-byte weight: no allocator grants it
    spec = TimingSpec(precision="bf16", warmup_steps=(0, 1), **huge)
    rows = run_job(spec)
    assert [r["status"] for r in rows] == ["OOM"] * 6
    assert sorted(r["warmup_steps"] for r in rows) == [0, 0, 0, 1, 1, 1]
    assert all("allocate" in r["error"] for r in rows)
    # The next configuration in the same process is unaffected.
    ok = run_job(TimingSpec(precision="bf16", warmup_steps=(1,), **TINY))
    assert [r["status"] for r in ok] == ["ok"] * 3


def test_time_steps_counts_only_timed_steps():
    calls = []
    work = build_workload(
        TimingSpec(precision="fp32", **TINY).model_config, 2, "fp32", torch.device("cpu")
    )
    step = make_step(work, "forward")

    def counted():
        calls.append(1)
        step()

    times = time_steps(counted, torch.device("cpu"), warmup=4, steps=3)
    assert len(calls) == 7 and len(times) == 3 and all(t > 0 for t in times)


def test_summary_statistics():
    stats = summarize_ms([0.001, 0.002, 0.003, 0.004])
    assert stats["mean_ms"] == pytest.approx(2.5)
    assert stats["median_ms"] == pytest.approx(2.5)
    assert stats["min_ms"] == pytest.approx(1) and stats["max_ms"] == pytest.approx(4)
    assert stats["iqr_ms"] == pytest.approx(1.5)
    assert stats["cv"] == pytest.approx(stats["std_ms"] / 2.5)


def test_flops_follow_the_6n_convention():
    dims = dict(vocab_size=10000, d_model=768, d_ff=3072, num_layers=12, num_heads=12)
    n = flops.matmul_parameters(10000, 768, 3072, 12)
    assert n == 12 * (4 * 768**2 + 3 * 768 * 3072) + 768 * 10000
    train = flops.flops_per_step("train_step", 4, 128, **dims)
    assert train == 4 * 128 * (6 * n + 12 * 12 * 12 * 64 * 128)
    assert flops.flops_per_step("forward", 4, 128, **dims) == pytest.approx(train / 3)


@pytest.mark.parametrize(("name", "precision", "tf32", "expected"), [
    ("NVIDIA H100 80GB HBM3", "bf16", False, 989.4),
    ("NVIDIA H100 80GB HBM3", "fp32", False, 66.9),
    ("NVIDIA H100 80GB HBM3", "fp32", True, 494.7),
    ("NVIDIA H100 PCIe", "bf16", False, 756.0),
    ("NVIDIA H200", "bf16", False, 989.4),
    ("NVIDIA A100-SXM4-80GB", "fp32", False, 19.5),
    ("Some Future GPU", "bf16", False, None),
])
def test_peak_table(name, precision, tf32, expected):
    assert hardware.peak_tflops(name, precision, tf32) == expected
