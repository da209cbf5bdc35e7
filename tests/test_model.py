import dataclasses

import pytest
import torch

from lmstudy.measure.model import ModelConfig, RMSNorm, TransformerLM, count_parameters

STUDY_SIZES = {"small": (768, 3072, 12, 12), "2.7B": (2560, 10240, 32, 32)}


@pytest.mark.parametrize(("size", "millions"), [("small", 128.6), ("2.7B", 3406.8)])
def test_parameter_counts_match_the_study(size, millions):
    d_model, d_ff, layers, heads = STUDY_SIZES[size]
    with torch.device("meta"):
        model = TransformerLM(ModelConfig(10000, 128, d_model, d_ff, layers, heads))
    assert count_parameters(model) / 1e6 == pytest.approx(millions, abs=0.05)


TINY = ModelConfig(vocab_size=97, context_length=16, d_model=32, d_ff=64, num_layers=2, num_heads=4)


def test_logits_are_causal():
    torch.manual_seed(0)
    model = TransformerLM(TINY)
    tokens = torch.randint(97, (2, 16))
    changed = tokens.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % 97
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert before.shape == (2, 16, 97)
    torch.testing.assert_close(before[:, :10], after[:, :10])
    assert not torch.allclose(before[:, 10:], after[:, 10:])


def test_sdpa_option_computes_the_same_function():
    torch.manual_seed(0)
    naive = TransformerLM(TINY)
    fused = TransformerLM(dataclasses.replace(TINY, attention="sdpa"))
    fused.load_state_dict(naive.state_dict())
    tokens = torch.randint(97, (3, 16))
    with torch.no_grad():
        torch.testing.assert_close(naive(tokens), fused(tokens), rtol=1e-4, atol=1e-5)


def test_rmsnorm_keeps_dtype_and_normalises():
    norm = RMSNorm(8)
    x = torch.randn(4, 8, dtype=torch.bfloat16) * 50
    y = norm(x)
    assert y.dtype == torch.bfloat16
    rms = y.float().pow(2).mean(-1).sqrt()
    torch.testing.assert_close(rms, torch.ones(4), rtol=2e-2, atol=2e-2)


def test_bad_head_count_is_refused():
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig(10, 8, d_model=30, d_ff=8, num_layers=1, num_heads=4)
