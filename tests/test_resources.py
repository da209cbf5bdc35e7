"""Scheduler resources estimated from the model's size (lmstudy.resources)."""

from __future__ import annotations

import pytest
import yaml

from lmstudy import resources

from .conftest import REPO


@pytest.mark.parametrize(
    "dims",
    [
        {"d_model": 64, "d_ff": 256, "num_layers": 2, "num_heads": 4},
        {"d_model": 96, "d_ff": 200, "num_layers": 3, "num_heads": 3},
    ],
)
def test_parameter_count_matches_the_model(dims):
    from lmstudy.model import ModelConfig, TransformerLM, count_parameters

    model = TransformerLM(ModelConfig(vocab_size=512, context_length=32, **dims))
    assert resources.parameter_count(vocab_size=512, **dims) == count_parameters(model)


def test_larger_models_ask_for_more_time_and_memory():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    asks = [
        resources.gpu_job(config["sizes"][name], config["vocab_size"], 512)
        for name in ("small", "medium", "large", "xl", "2.7B")
    ]
    assert all(ask["gpu"] == 1 for ask in asks)
    for smaller, larger in zip(asks, asks[1:], strict=False):
        assert larger["runtime"] > smaller["runtime"]
        assert larger["mem_mb"] > smaller["mem_mb"]
    # room for the 2.7B model's fp32 weights (13.6 GB with SwiGLU) in host memory
    assert asks[-1]["mem_mb"] > 3.4e9 * 4 / 2**20


def test_longer_contexts_ask_for_more_time():
    dims = {"d_model": 2560, "d_ff": 10240, "num_layers": 32, "num_heads": 32}
    short = resources.gpu_job(dims, 10000, 128)
    long = resources.gpu_job(dims, 10000, 4096)
    assert long["runtime"] > short["runtime"]
    assert long["mem_mb"] == short["mem_mb"]


def test_requests_are_capped_so_a_job_can_still_be_scheduled():
    # the smoke preset's `oversized` size: 2e11 parameters, meant to run out of memory
    ask = resources.gpu_job({"d_model": 64, "d_ff": 2**30, "num_layers": 1}, 512, 32)
    assert ask["mem_mb"] == resources.MAX_MEM_MB
    assert ask["runtime"] == resources.MAX_RUNTIME_MIN
