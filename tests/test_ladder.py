"""The optimization ladder (section 7): its rungs, what a device cannot run, and the matmul reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import torch
import yaml

from lmstudy.analyse import ladder_table
from lmstudy.ladder_rungs import DEFAULT_RUNGS, RUNGS
from lmstudy.measure import rung_support
from lmstudy.measure.ladder_bench import BenchSpec, measure_rung
from lmstudy.measure.matmul_ceiling import measure_ceiling
from lmstudy.measure.spec import init_fields
from lmstudy.phases import PhaseClock

from .conftest import REPO
from .specs import spec_for

TINY = dict(d_model=32, d_ff=64, num_layers=1, num_heads=2, context_length=8, batch_size=2, vocab_size=64,
            warmup_steps=0, timed_steps=2, profile_steps=0, device="cpu")


def bench_spec(rung: str, **overrides) -> BenchSpec:
    """The ladder's spec of a smoke-preset job (tests/specs.py) with `overrides`."""
    return spec_for("ladder", rung=rung, **overrides)


def as_code(spec: BenchSpec) -> str:
    """`spec` as Python source, for a process of its own."""
    return f"BenchSpec(**{init_fields(spec)!r})"


def test_the_configs_rungs_are_the_benchmarks_default_rungs_in_order():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert config["ladder"]["rungs"] == list(DEFAULT_RUNGS)
    assert set(DEFAULT_RUNGS) <= set(RUNGS)


@pytest.mark.parametrize("rung", ["bf16-sdpa-cudagraphs-master", "bf16-sdpa-cudagraphs-fused-flash",
                                  "bf16-sdpa-cudagraphs-fused-cudnn"])
def test_a_rung_a_cpu_cannot_run_is_an_unsupported_row_decided_up_front(rung):
    clock = PhaseClock()
    row = measure_rung(bench_spec(rung, size="tiny", **TINY), clock)
    assert row["status"] == "unsupported"
    reason = row["reason"]
    assert reason.endswith("this run is on cpu.") and ". " not in reason and "\n" not in reason  # 1 sentence
    assert "median_ms" not in row and row["gpu"].startswith("cpu")
    assert clock.seconds["build"] == 0  # nothing was built to find it out


def test_a_missing_compiler_makes_a_compiled_rung_unsupported_not_a_failure():
    # The backend's own refusal, the last resort: inductor finds no C++ compiler.
    code = (
        "import json\n"
        "from lmstudy.measure.ladder_bench import BenchSpec, measure_rung\n"
        f"print(json.dumps(measure_rung({as_code(bench_spec('bf16-sdpa-compile', size='', **TINY))}), "
        "default=str))\n"
    )
    env = {**os.environ, "CXX": "/nonexistent/g++", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["status"] == "unsupported"
    assert "No working C++ compiler" in row["reason"] and "\n" not in row["reason"]


def test_only_a_refusal_is_unsupported_anything_else_is_raised():
    # A real refusal: fused AdamW over parameters of a device it has no kernel for.
    weight = torch.nn.Parameter(torch.zeros(2, device="meta"))
    weight.grad = torch.zeros(2, device="meta")
    with pytest.raises(RuntimeError, match="supported devices") as refused:
        torch.optim.AdamW([weight], fused=True).step()
    with rung_support.unsupported_is_a_result() as unsupported:
        raise refused.value
    assert unsupported and unsupported.fields()["status"] == "unsupported"
    # A bug is not: a shape mismatch stays an error, and so does out of memory.
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        with rung_support.unsupported_is_a_result():
            torch.ones(2, 3) @ torch.ones(2, 3)
    assert rung_support.refusal(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")) is None
    assert rung_support.refusal(ValueError("not supported")) is None


def test_the_matmul_ceiling_times_bursts_of_back_to_back_products_at_each_size():
    rows = measure_ceiling([32, 64], warmup_s=0.0, bursts=3, burst_products=4, device=torch.device("cpu"))
    for n in (32, 64):
        sustained = [r for r in rows if r["n"] == n and r["kind"] == "sustained"]
        short = [r for r in rows if r["n"] == n and r["kind"] == "short"]
        assert 3 <= len(sustained) <= 30 and [r["burst"] for r in sustained] == list(range(len(sustained)))
        assert [r["products"] for r in short] == [1, 1, 1] and all(r["products"] == 4 for r in sustained)
        # The last window of 3 is the steady one.
        steady = [r["steady"] for r in sustained]
        assert steady[-3:] == [True] * 3 and sum(steady) == 3
    # Each burst's rate is its products' FLOPs over the burst's time; no NVML on a CPU: no clocks.
    for r in rows:
        assert r["tflops"] == pytest.approx(2 * r["n"] ** 3 * r["products"] / (r["burst_ms"] / 1e3) / 1e12)
        assert r["sm_clock_mhz"] is None and r["power_w"] is None


def test_a_rung_job_measures_the_ceiling_of_its_own_gpu_after_the_rung():
    # In a process of its own, as lmstudy measure ladder runs it: it forks the measuring processes,
    # which this test session (OpenMP threads started) cannot do safely.
    import subprocess
    import sys

    code = (
        "import json\n"
        "from lmstudy.measure.ladder_bench import BenchSpec, CeilingSpec, measure_rung_and_ceiling\n"
        "from lmstudy.measure.repeat import NoisePolicy\n"
        f"spec = {as_code(bench_spec('fp32', size='tiny', **TINY_BENCH, warmup_steps=0, timed_steps=2))}\n"
        "ceiling = CeilingSpec(sizes=(32,), warmup_s=0, bursts=2, burst_products=1)\n"
        "policy = NoisePolicy(2, 2, 0.05, None)\n"
        "print(json.dumps(measure_rung_and_ceiling(spec, ceiling, policy), default=str))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    row, bursts = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["status"] == "ok" and row["processes"] == 2
    # Sustained bursts until the rate settles (at most 10 windows on a noisy CPU), then 2 short ones.
    assert {(b["size"], b["rung_key"], b["n"]) for b in bursts} == {("tiny", "fp32", 32)}
    assert [b["kind"] for b in bursts].count("short") == 2 and 2 <= len(bursts) - 2 <= 20
    assert all(b["gpu"] == row["gpu"] and b["host"] == row["host"] for b in bursts)  # the same device


def _bursts(size, rung, gpu, rates, n=8192):
    return [{"size": size, "rung_key": rung, "gpu_uuid": gpu, "gpu": "NVIDIA H200", "n": n, "burst": i,
             "products": 20, "tflops": t} for i, t in enumerate(rates)]


def test_each_rung_is_a_share_of_its_own_gpus_ceiling():
    rungs = pd.DataFrame([
        {"size": "s", "rung_key": "fp32", "status": "ok", "achieved_tflops": 10.0},
        {"size": "s", "rung_key": "bf16", "status": "ok", "achieved_tflops": 400.0},
        {"size": "s", "rung_key": "sdpa", "status": "OOM", "achieved_tflops": None},
    ])
    # Two GPUs 3% apart (the review's 714 vs 736); the bf16 rung's also bursts higher at n=16384.
    matmul = pd.DataFrame(
        _bursts("s", "fp32", "GPU-a", [700.0, 714.0, 710.0])
        + _bursts("s", "bf16", "GPU-b", [730.0, 736.0])
        + _bursts("s", "bf16", "GPU-b", [780.0, 790.0, 785.0], n=16384)
        + _bursts("s", "sdpa", "GPU-a", [712.0])
    )
    joined = ladder_table.join(rungs, matmul).set_index("rung_key")
    assert list(joined["matmul_tflops"]) == [714.0, 790.0, 712.0]  # the highest burst of each job
    assert joined.loc["bf16", "matmul_n"] == 16384
    assert joined.loc["bf16", "matmul_median_tflops"] == 785.0  # the median burst at that n
    assert joined.loc["fp32", "share_of_matmul"] == pytest.approx(10 / 714)
    assert joined.loc["bf16", "share_of_matmul"] == pytest.approx(400 / 790)
    assert pd.isna(joined.loc["sdpa", "share_of_matmul"])


def test_bursts_without_a_job_key_give_every_rung_the_highest():
    rungs = pd.DataFrame([{"size": "s", "rung_key": "fp32", "status": "ok", "achieved_tflops": 10.0}])
    matmul = pd.DataFrame([{"when": "before", "n": 8, "burst": 0, "products": 2, "tflops": 40.0},
                           {"when": "after", "n": 8, "burst": 0, "products": 2, "tflops": 50.0}])
    joined = ladder_table.join(rungs, matmul)
    assert joined["matmul_tflops"].iloc[0] == 50.0 and joined["share_of_matmul"].iloc[0] == 0.2


# -- rungs beyond the study's four: they change how a step is computed, not what -------------

TINY_BENCH = dict(d_model=64, d_ff=256, num_layers=2, num_heads=4, context_length=32, batch_size=4,
                  vocab_size=512, profile_steps=0, device="cpu")


@pytest.fixture(scope="module")
def reference_losses():
    from lmstudy.measure.ladder_bench import training_losses

    return {r: training_losses(bench_spec(r, **TINY_BENCH), 50) for r in ("fp32", "bf16")}


def test_bf16_weights_with_fp32_masters_follow_plain_bf16_within_its_noise(reference_losses):
    from lmstudy.measure.ladder_bench import training_losses, within_bf16_noise

    losses = training_losses(bench_spec("bf16-sdpa-master", **TINY_BENCH), 50)
    ok, gap, noise = within_bf16_noise(losses, reference_losses["bf16"], reference_losses["fp32"])
    assert ok, f"gap {gap} to bf16 against its noise {noise}"
    # It trained: the loss fell as plain bf16's did.
    assert losses[-1] < 0.5 * losses[0]


def test_a_rung_that_changes_the_update_is_outside_bf16_noise(reference_losses, monkeypatch):
    import functools

    from lmstudy.measure import ladder_bench
    from lmstudy.measure.master_weights import MasterWeightAdamW

    # 10% more learning rate: a different step, not a different rounding of the same one.
    monkeypatch.setattr(ladder_bench, "MasterWeightAdamW", functools.partial(MasterWeightAdamW, lr=1.1e-3))
    losses = ladder_bench.training_losses(bench_spec("bf16-sdpa-master", **TINY_BENCH), 50)
    ok, gap, noise = ladder_bench.within_bf16_noise(
        losses, reference_losses["bf16"], reference_losses["fp32"]
    )
    assert not ok and gap > 2 * noise


def test_master_weights_leave_the_matrix_weights_in_bf16_and_the_rest_in_fp32():
    import torch

    from lmstudy.measure.master_weights import MasterWeightAdamW
    from lmstudy.measure.model import Linear, ModelConfig, TransformerLM

    model = TransformerLM(ModelConfig(vocab_size=64, context_length=8, d_model=16, d_ff=32, num_layers=1,
                                      num_heads=2))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = MasterWeightAdamW(model, compiled=False)
    for name, p in model.named_parameters():
        module = model.get_submodule(name.rsplit(".", 1)[0])
        expected = torch.bfloat16 if isinstance(module, Linear) else torch.float32
        assert p.dtype == expected, name
        master = getattr(p, "master", p)
        assert master.dtype == torch.float32 and torch.equal(master, before[name])
    assert optimizer.step_count.item() == 0


def test_the_compiled_master_weight_update_is_the_eager_one():
    import torch

    from lmstudy.measure.master_weights import MasterWeightAdamW
    from lmstudy.measure.model import ModelConfig, TransformerLM, cross_entropy

    def masters_after_three_steps(compiled: bool) -> list:
        torch.manual_seed(0)
        model = TransformerLM(ModelConfig(vocab_size=64, context_length=8, d_model=16, d_ff=32, num_layers=2,
                                          num_heads=2))
        optimizer = MasterWeightAdamW(model, compiled=compiled)
        inputs, targets = torch.randint(64, (2, 8)), torch.randint(64, (2, 8))
        for _ in range(3):
            model.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                cross_entropy(model(inputs), targets).backward()
            optimizer.step()
        return [m.detach().clone() for m in optimizer.masters]

    eager, compiled = masters_after_three_steps(False), masters_after_three_steps(True)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(eager, compiled, strict=True))
    # ...and the update did change every master.
    torch.manual_seed(0)
    fresh = TransformerLM(ModelConfig(vocab_size=64, context_length=8, d_model=16, d_ff=32, num_layers=2,
                                      num_heads=2))
    assert all(not torch.equal(p.detach(), m) for p, m in zip(fresh.parameters(), eager, strict=True))


def test_profiled_time_above_the_timed_step_leaves_the_rest_unknown_not_zero():
    from lmstudy.report.render import column_formatter
    from lmstudy.sections.ladder.section import breakdown_frame, breakdown_table

    ladder = pd.DataFrame({"size": ["tiny", "tiny"], "rung": ["fp32", "bf16"], "status": ["ok", "ok"],
                           "median_ms": [39.2, 89.5], "gpu_busy_ms": [30.7, 145.8]})
    table = breakdown_table(breakdown_frame(ladder), "CPU operator time")
    rest = table["rest of the step ms"]
    assert rest.iloc[0] == pytest.approx(39.2 - 30.7) and pd.isna(rest.iloc[1])
    assert column_formatter(rest)(rest.iloc[1]) == "n/a"
