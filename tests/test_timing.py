import json

import pytest
import torch

from lmstudy import flops, hardware
from lmstudy.analyse.stats import summarize_ms
from lmstudy.measure.model_facts import model_facts
from lmstudy.measure.repeat import NoisePolicy
from lmstudy.measure.steps import build_workload, make_step
from lmstudy.measure.timing import rows_from_processes, time_steps

from .conftest import timing_job
from .specs import spec_for

TINY = dict(size="t", d_model=32, d_ff=64, num_layers=1, num_heads=2, context_length=16,
            batch_size=2, vocab_size=64, device="cpu", timed_steps=3)


def test_job_rows_cover_every_pass_and_warmup():
    spec = spec_for("timing", precision="fp32", warmup_steps=(0, 2), **TINY)
    rows = timing_job(spec)
    got = {(r["pass"], r["warmup_steps"]) for r in rows}
    assert got == {(p, w) for p in spec.passes for w in (0, 2)}
    for row in rows:
        assert row["status"] == "ok"
        processes = json.loads(row["step_times_ms"])
        assert row["processes"] == len(processes) >= 2  # at least two fresh processes per pass
        assert all(len(times) == 3 for times in processes)
        assert row["ci_low_ms"] <= row["median_ms"] <= row["ci_high_ms"]
        assert row["min_ms"] <= row["median_ms"]
        assert row["median_ms"] <= row["max_ms"]
        assert row["tokens_per_s"] == pytest.approx(2 * 16 / (row["median_ms"] / 1e3))
        assert row["torch"] == torch.__version__ and row["commit"]
        assert row["mfu"] is None  # a CPU has no datasheet peak
        assert row["process_s"] > 0 and row["steps_run"] == 5
        assert row["gpu_busy_share"] is None  # a CPU: no GPU busy time


def test_every_warmup_row_is_its_window_of_each_processs_trajectory():
    """Warm-up w's row takes, from each fresh process of its pass, the window after its first w steps."""
    noise = NoisePolicy(2, 2, 0.05, None)
    spec = spec_for("timing", precision="fp32", warmup_steps=(0, 1, 3), noise=noise, **TINY)
    rows = timing_job(spec)
    for pass_name in spec.passes:
        mine = [r for r in rows if r["pass"] == pass_name]
        (trajectories,) = {r["trajectory_ms"] for r in mine}
        trajectories = json.loads(trajectories)
        assert len(trajectories) == 2  # two processes, each timing max(warm-ups) + timed steps
        assert all(len(t) == 3 + 3 for t in trajectories)
        for row in mine:
            w = row["warmup_steps"]
            assert json.loads(row["step_times_ms"]) == [t[w: w + 3] for t in trajectories]
            medians = sorted(
                summarize_ms([x / 1e3 for x in t[w: w + 3]])["median_ms"] for t in trajectories
            )
            assert row["median_ms"] == pytest.approx(sum(medians) / 2, rel=1e-3)  # median of two
            assert row["process_spread"] == pytest.approx(medians[1] / medians[0] - 1, rel=1e-3)
            assert row["first_step_ms"] == pytest.approx(sum(t[0] for t in trajectories) / 2, abs=1e-3)
    assert len({r["trajectory_ms"] for r in rows}) == len(spec.passes)


def test_rows_take_the_median_over_processes_with_its_interval():
    spec = spec_for("timing", precision="fp32", warmup_steps=(1,), **TINY)
    results = [_trajectory([50, 10, 10, 10]), _trajectory([50, 20, 20, 20]), _trajectory([50, 12, 12, 12])]
    (row,) = rows_from_processes(spec, results, model_facts(spec))
    assert row["processes"] == 3 and row["median_ms"] == pytest.approx(12)
    assert row["process_spread"] == pytest.approx(1.0)
    # the interval sees the processes, not the steps
    assert row["ci_low_ms"] <= 10 and row["ci_high_ms"] >= 20
    assert row["mean_ms"] == pytest.approx(14)  # over every step of every window


def _trajectory(step_ms, error=None):
    steps = range(1, len(step_ms) + 1)
    return {"pass": "train_step", "device": "cpu", "env": {"gpu": "cpu (x86_64)"},
            "step_s": [t / 1e3 for t in step_ms], "error": error,
            "peak_allocated": [100 * i for i in steps], "peak_reserved": [200 * i for i in steps],
            "start_s": 0.1, "fork_s": 0.01, "build_s": 0.2, "clocks": {}, "gpu_busy_ms": None}


def test_a_window_the_trajectory_did_not_reach_is_out_of_memory():
    """A process that ran out of memory at step 4 gave warm-ups 0 and 1 their windows, not 5."""
    spec = spec_for("timing", precision="fp32", warmup_steps=(0, 1, 5), **TINY)
    trajectory = _trajectory([50, 10, 11, 12], error="CUDA out of memory")
    rows = rows_from_processes(spec, [trajectory], model_facts(spec))
    status = {r["warmup_steps"]: r["status"] for r in rows}
    assert status == {0: "ok", 1: "ok", 5: "OOM"}
    by_warmup = {r["warmup_steps"]: r for r in rows}
    assert json.loads(by_warmup[1]["step_times_ms"]) == [[10, 11, 12]]
    assert by_warmup[0]["median_ms"] == pytest.approx(11)
    assert by_warmup[5]["error"] == "CUDA out of memory"
    # each window's peaks are those a fresh process reports after its last step
    assert (by_warmup[0]["peak_allocated_bytes"], by_warmup[0]["peak_reserved_bytes"]) == (300, 600)
    assert (by_warmup[1]["peak_allocated_bytes"], by_warmup[1]["peak_reserved_bytes"]) == (400, 800)
    assert all(r["first_step_ms"] == pytest.approx(50) for r in rows)


def test_compile_time_is_the_first_steps_excess():
    spec = spec_for("timing", precision="bf16", variant="sdpa-compile", passes=("train_step",),
                      warmup_steps=(0, 1), **TINY)
    rows = rows_from_processes(spec, [_trajectory([9000, 10, 12, 11])], model_facts(spec))
    assert rows[0]["compile_s"] == pytest.approx((9000 - 11.5) / 1e3)


def test_out_of_memory_is_a_row_and_the_job_goes_on():
    huge = {**TINY, "d_ff": 2**34}  # a 2**39-byte weight: no allocator grants it
    spec = spec_for("timing", precision="bf16", warmup_steps=(0, 1), **huge)
    rows = timing_job(spec)
    assert [r["status"] for r in rows] == ["OOM"] * 6
    assert sorted(r["warmup_steps"] for r in rows) == [0, 0, 0, 1, 1, 1]
    assert all("allocate" in r["error"] for r in rows)
    # The next job is unaffected.
    ok = timing_job(spec_for("timing", precision="bf16", warmup_steps=(1,), **TINY))
    assert [r["status"] for r in ok] == ["ok"] * 3


def test_time_steps_counts_only_timed_steps():
    calls = []
    spec = spec_for("timing", precision="fp32", warmup_steps=(0,), **TINY)
    work = build_workload(spec.model_config, 2, "fp32", torch.device("cpu"))
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
    n = flops.parameter_count(10000, 768, 3072, 12, in_matmuls=True)
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
    ("NVIDIA H200", "fp16", False, 989.4),  # fp16's dense tensor rate is bf16's
    ("NVIDIA H200", "bf16", True, 989.4),  # TF32 changes fp32 matmuls only
    ("NVIDIA A100-SXM4-80GB", "fp32", False, 19.5),
    ("NVIDIA L40", "bf16", False, 181.05),
    ("NVIDIA L4", "bf16", False, 121.0),
    ("NVIDIA A10", "bf16", False, 125.0),
    ("NVIDIA A10G", "bf16", False, None),  # not an A10: no datasheet entry, no guess
    ("NVIDIA H200 NVL", "bf16", False, None),
    ("Tesla V100-SXM2-16GB", "bf16", False, None),
    ("Some Future GPU", "bf16", False, None),
])
def test_peak_table(name, precision, tf32, expected):
    assert hardware.peak_tflops(name, precision, tf32) == expected


def _datasheet_mismatches(name: str, rates: tuple[float, float, float]) -> list[str]:
    """What peak_tflops reads back wrong for one entry of the datasheet table (none: [])."""
    bf16, tf32, fp32 = (None if rate != rate else rate for rate in rates)  # NaN: the GPU has no such unit
    expected = {("fp32", False): fp32, ("fp32", True): tf32, ("bf16", False): bf16, ("fp16", False): bf16}
    wrong = [f"{name}: {precision}{' with TF32' if with_tf32 else ''} reads {got}, the table says {rate}"
             for (precision, with_tf32), rate in expected.items()
             if (got := hardware.peak_tflops(name, precision, with_tf32)) != rate]
    # Tensor cores beat the plain fp32 units wherever there are any.
    if bf16 is not None and not bf16 >= tf32 >= fp32 * 0.99:
        wrong.append(f"{name}: bf16 {bf16} >= TF32 {tf32} >= fp32 {fp32} does not hold")
    # Looked up whole: a name that only begins like it (L4 and L40, A10 and A10G) is another GPU.
    if (got := hardware.peak_tflops(f"{name} NEXT", "fp32", False)) is not None:
        wrong.append(f"{name} NEXT, another GPU, reads {name}'s fp32 peak {got}")
    return wrong


def test_every_datasheet_entry_reads_back_by_its_own_name_only():
    assert len(hardware.PEAKS) >= 20
    wrong = [line for name, rates in hardware.PEAKS.items() for line in _datasheet_mismatches(name, rates)]
    assert not wrong, "\n".join(wrong)
    # The check sees a wrong entry: the L40 read with the L4's rates differs in all four units.
    assert len(_datasheet_mismatches("NVIDIA L40", hardware.PEAKS["NVIDIA L4"])) == 4


def test_one_mfu_definition_names_its_peak():
    cases = (("fp32", False), ("fp32", True), ("bf16", True), ("fp16", False))
    assert [hardware.peak_unit(p, t) for p, t in cases] == ["fp32", "tf32", "bf16", "fp16"]
    with pytest.raises(ValueError, match="unknown precision"):
        hardware.peak_unit("int8", False)
    import pandas as pd

    from lmstudy.report.labels import peak_words

    rows = pd.DataFrame({"precision": ["fp32", "fp32", "bf16"], "tf32_matmul": [False, True, False],
                         "peak_tflops": [66.9, 494.7, 989.4]})
    assert peak_words(rows.iloc[[0]]) == "of the fp32 peak (CUDA cores, no TF32), 66.9 TFLOP/s"
    assert peak_words(rows.iloc[[1]]) == "of the TF32 tensor-core peak, 494.7 TFLOP/s"
    assert peak_words(rows.iloc[[2]]) == "of the bf16 tensor-core peak, 989.4 TFLOP/s"


def test_the_jobs_process_imports_what_builds_load_lazily_and_stays_off_the_device():
    """AdamW's constructor imports torch._dynamo (seconds): once in the parent, not in each build."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from lmstudy.measure.steps import import_lazy_modules\n"
        "before = 'torch._dynamo' in sys.modules\n"
        "import_lazy_modules()\n"
        "print(before, 'torch._dynamo' in sys.modules, torch.cuda.is_initialized())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True", "False"]


def test_a_host_bound_configuration_whose_gpu_times_agree_stops_at_the_minimum():
    """Its wall time spreads with the host, but the GPU's time already answers: no third process."""
    policy = NoisePolicy(2, 4, 0.05, min_gpu_busy=0.85)
    spread_wall = [[10.0, 10.1], [20.0, 20.2]]  # the two processes' medians differ 2x
    assert policy.wants_more(spread_wall, [4.0, 4.02]) is False  # GPU busy 20-40%: host-bound, agreeing
    assert policy.wants_more(spread_wall, [4.0, 6.0]) is True  # GPU times disagree too
    assert policy.wants_more(spread_wall, [9.5, 19.0]) is True  # GPU-bound: the wall time must agree
    assert policy.wants_more(spread_wall, [None, None]) is True  # a CPU: no GPU time
    assert NoisePolicy(2, 4, 0.05, None).wants_more(spread_wall, [4.0, 4.02]) is True  # no threshold given
