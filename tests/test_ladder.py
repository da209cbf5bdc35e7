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
from lmstudy.measure.ladder_bench import BenchSpec, matmul_reference, measure_rung
from lmstudy.phases import PhaseClock

from .conftest import REPO

TINY = dict(d_model=32, d_ff=64, num_layers=1, num_heads=2, context_length=8, batch_size=2, vocab_size=64,
            warmup_steps=0, timed_steps=2, device="cpu")


def test_the_configs_rungs_are_the_benchmarks_default_rungs_in_order():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert config["ladder"]["rungs"] == list(DEFAULT_RUNGS)
    assert set(DEFAULT_RUNGS) <= set(RUNGS)


@pytest.mark.parametrize("rung", ["bf16-sdpa-cudagraphs-master", "bf16-sdpa-cudagraphs-fused-flash",
                                  "bf16-sdpa-cudagraphs-fused-cudnn"])
def test_a_rung_a_cpu_cannot_run_is_an_unsupported_row_decided_up_front(rung):
    clock = PhaseClock()
    row = measure_rung(BenchSpec(rung=rung, size="tiny", **TINY), clock)
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
        f"print(json.dumps(measure_rung(BenchSpec(rung='bf16-sdpa-compile', **{TINY!r})), default=str))\n"
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


def test_the_matmul_reference_measures_a_burst_and_a_sustained_run():
    rows = matmul_reference(64, 3, 5, device="cpu")
    assert [(r["kind"], r["repeats"], r["n"]) for r in rows] == [("burst", 3, 64), ("sustained", 5, 64)]
    assert all(r["tflops"] > 0 and r["sm_clock_mhz"] is None and r["gpu"].startswith("cpu") for r in rows)


def test_each_rung_is_a_share_of_the_highest_matmul_rate():
    rungs = pd.DataFrame([
        {"size": "s", "rung_key": "fp32", "status": "ok", "achieved_tflops": 10.0},
        {"size": "s", "rung_key": "bf16", "status": "OOM", "achieved_tflops": None},
    ])
    matmul = pd.DataFrame(
        [{"kind": "burst", "n": 8, "tflops": 40.0}, {"kind": "sustained", "n": 8, "tflops": 50.0}]
    )
    joined = ladder_table.join(rungs, matmul)
    assert list(joined["matmul_tflops"]) == [50.0, 50.0]
    shares = joined["share_of_matmul"]
    assert shares.iloc[0] == pytest.approx(0.2) and pd.isna(shares.iloc[1])
    assert list(joined["matmul_burst_tflops"]) == [40.0, 40.0] and list(joined["matmul_n"]) == [8, 8]


# -- rungs beyond the study's four: they change how a step is computed, not what -------------

TINY_BENCH = dict(d_model=64, d_ff=256, num_layers=2, num_heads=4, context_length=32, batch_size=4,
                  vocab_size=512, device="cpu")


@pytest.fixture(scope="module")
def reference_losses():
    from lmstudy.measure.ladder_bench import BenchSpec, training_losses

    return {r: training_losses(BenchSpec(rung=r, **TINY_BENCH), 50) for r in ("fp32", "bf16")}


def test_bf16_weights_with_fp32_masters_follow_plain_bf16_within_its_noise(reference_losses):
    from lmstudy.measure.ladder_bench import BenchSpec, training_losses, within_bf16_noise

    losses = training_losses(BenchSpec(rung="bf16-sdpa-master", **TINY_BENCH), 50)
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
    losses = ladder_bench.training_losses(ladder_bench.BenchSpec(rung="bf16-sdpa-master", **TINY_BENCH), 50)
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
    from lmstudy.report.sections.ladder import breakdown_frame, breakdown_table

    ladder = pd.DataFrame({"size": ["tiny", "tiny"], "rung": ["fp32", "bf16"], "status": ["ok", "ok"],
                           "median_ms": [39.2, 89.5], "gpu_busy_ms": [30.7, 145.8]})
    table = breakdown_table(breakdown_frame(ladder), "CPU operator time")
    rest = table["rest of the step ms"]
    assert rest.iloc[0] == pytest.approx(39.2 - 30.7) and pd.isna(rest.iloc[1])
    assert column_formatter(rest)(rest.iloc[1]) == "n/a"
