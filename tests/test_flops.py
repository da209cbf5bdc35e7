"""The study's FLOP formula (lmstudy.flops) equals PyTorch's own count, for every size of config.yaml.

torch.utils.flop_counter.FlopCounterMode counts the matrix products each
operator runs, forward and backward; the formula (6N + 12·L·H·Q·T per token
for a step with a backward, a third of it for forward only) must give the
same number on the built-in model, with the naive attention and with SDPA
(which FlopCounterMode counts as the full S x S products too). AdamW's step
counts nothing: a training step is forward+backward's FLOPs.
The model is built on the meta device: shapes without storage, so even the
2.7B model costs no memory and no arithmetic.
"""

from __future__ import annotations

import pytest
import torch
import yaml
from torch.utils.flop_counter import FlopCounterMode

from lmstudy import flops
from lmstudy.measure.model import ModelConfig
from lmstudy.measure.steps import PASSES, build_workload, make_step

from .conftest import REPO

CONFIG = yaml.safe_load((REPO / "config.yaml").read_text())
BATCH, CONTEXT = 2, 16  # on the meta device any shape is free; small ones keep the build quick


def _every_size() -> dict[str, dict]:
    """The study's sizes and every preset's own."""
    sizes = dict(CONFIG["sizes"])
    for preset in CONFIG["presets"].values():
        sizes.update(preset.get("sizes") or {})
    return sizes


SIZES = _every_size()


def test_every_size_of_the_config_is_here():
    assert {"small", "medium", "large", "xl", "2.7B", "tiny"} <= set(SIZES)


def _counted(dims: dict, attention: str, passes) -> dict[str, int]:
    """FlopCounterMode's count of one step of each pass, the passes run in turn on one model."""
    config = ModelConfig(vocab_size=CONFIG["vocab_size"], context_length=CONTEXT, attention=attention, **dims)
    work = build_workload(config, BATCH, "fp32", torch.device("meta"), with_optimizer="train_step" in passes)
    counted = {}
    for pass_name in passes:
        with FlopCounterMode(display=False) as counter:
            make_step(work, pass_name)()
        counted[pass_name] = counter.get_total_flops()
    return counted


def _formula(dims: dict, passes) -> dict[str, float]:
    return {
        pass_name: flops.flops_per_step(pass_name, BATCH, CONTEXT, vocab_size=CONFIG["vocab_size"], **dims)
        for pass_name in passes
    }


@pytest.mark.parametrize("size", sorted(SIZES))
def test_the_formula_counts_what_pytorch_counts(size):
    passes = ("forward", "forward_backward")
    assert _counted(SIZES[size], "naive", passes) == _formula(SIZES[size], passes)


# The optimizer's step and the attention's implementation do not depend on the size: two suffice.
@pytest.mark.parametrize("size", ["tiny", "small"])
@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_every_pass_and_attention_count_as_the_formula_says(size, attention):
    assert _counted(SIZES[size], attention, PASSES) == _formula(SIZES[size], PASSES)
