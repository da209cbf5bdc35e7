"""The optimization ladder, from real timing rows measured on a CPU."""

from __future__ import annotations

import pandas as pd
import pytest

from lmstudy.atomic import write_csv
from lmstudy.report import Findings, Table
from lmstudy.sections import ladder
from lmstudy.timing import TimingSpec

from .conftest import timing_job

TINY = {"d_model": 32, "d_ff": 128, "num_layers": 1, "num_heads": 2}


@pytest.fixture(scope="module")
def timing_rows():
    rows = []
    for precision, variant in (("fp32", "naive"), ("bf16", "naive"), ("bf16", "sdpa")):
        spec = TimingSpec(
            size="tiny",
            **TINY,
            context_length=16,
            batch_size=2,
            vocab_size=128,
            precision=precision,
            variant=variant,
            passes=("forward", "train_step"),
            warmup_steps=(1,),
            timed_steps=2,
            device="cpu",
        )
        rows += timing_job(spec)
    return pd.DataFrame(rows)


def test_ladder_rungs_and_speedups(timing_rows):
    frame = ladder.ladder_frame(timing_rows[timing_rows["pass"] == "train_step"])
    assert list(frame["rung"]) == ["fp32", "bf16", "bf16 + SDPA"]
    median = frame.set_index("rung")["median_ms"]
    assert frame.set_index("rung").loc["fp32", "speedup_vs_fp32"] == pytest.approx(1.0)
    assert frame.set_index("rung").loc["bf16 + SDPA", "speedup_vs_previous"] == pytest.approx(
        median["bf16"] / median["bf16 + SDPA"]
    )
    assert frame.set_index("rung").loc["bf16 + SDPA", "speedup_vs_fp32"] == pytest.approx(
        median["fp32"] / median["bf16 + SDPA"]
    )


def test_section_names_the_missing_rung(timing_rows, tmp_path):
    write_csv(tmp_path / "timing" / "timing.csv", timing_rows)
    ladder.make_figures(tmp_path, tmp_path / "figures")
    assert (tmp_path / "figures" / "ladder.png").exists()
    built = ladder.build(tmp_path, tmp_path / "figures")
    findings = next(b for b in built.blocks if isinstance(b, Findings)).items
    assert findings[0].startswith("Not measured: bf16 + SDPA + compile")
    assert any(f.startswith("tiny at context 16: the fastest rung is") for f in findings)
    table = next(b.frame for b in built.blocks if isinstance(b, Table))
    assert list(table["rung"]) == ["fp32", "bf16", "bf16 + SDPA"]


# -- rungs beyond the study's four: they change how a step is computed, not what -------------

TINY_BENCH = dict(d_model=64, d_ff=256, num_layers=2, num_heads=4, context_length=32, batch_size=4,
                  vocab_size=512, device="cpu")


@pytest.fixture(scope="module")
def reference_losses():
    from lmstudy.ladder_bench import BenchSpec, training_losses

    return {r: training_losses(BenchSpec(rung=r, **TINY_BENCH), 50) for r in ("fp32", "bf16")}


def test_bf16_weights_with_fp32_masters_follow_plain_bf16_within_its_noise(reference_losses):
    from lmstudy.ladder_bench import BenchSpec, training_losses, within_bf16_noise

    losses = training_losses(BenchSpec(rung="bf16-sdpa-master", **TINY_BENCH), 50)
    ok, gap, noise = within_bf16_noise(losses, reference_losses["bf16"], reference_losses["fp32"])
    assert ok, f"gap {gap} to bf16 against its noise {noise}"
    # It trained: the loss fell as plain bf16's did.
    assert losses[-1] < 0.5 * losses[0]


def test_a_rung_that_changes_the_update_is_outside_bf16_noise(reference_losses, monkeypatch):
    import functools

    from lmstudy import ladder_bench
    from lmstudy.master_weights import MasterWeightAdamW

    # 10% more learning rate: a different step, not a different rounding of the same one.
    monkeypatch.setattr(ladder_bench, "MasterWeightAdamW", functools.partial(MasterWeightAdamW, lr=1.1e-3))
    losses = ladder_bench.training_losses(ladder_bench.BenchSpec(rung="bf16-sdpa-master", **TINY_BENCH), 50)
    ok, gap, noise = ladder_bench.within_bf16_noise(
        losses, reference_losses["bf16"], reference_losses["fp32"]
    )
    assert not ok and gap > 2 * noise


def test_master_weights_leave_the_matrix_weights_in_bf16_and_the_rest_in_fp32():
    import torch

    from lmstudy.master_weights import MasterWeightAdamW
    from lmstudy.model import Linear, ModelConfig, TransformerLM

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

    from lmstudy.master_weights import MasterWeightAdamW
    from lmstudy.model import ModelConfig, TransformerLM, cross_entropy

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
