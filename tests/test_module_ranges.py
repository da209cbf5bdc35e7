"""Per-module profiler ranges (lmstudy.measure.module_ranges) in the forward and the backward, balanced
whatever a step raises: on the CPU, where autograd runs the backward on the caller's thread."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import torch
from torch import nn

from lmstudy.measure import module_ranges as mr
from lmstudy.measure.factory import build_model
from lmstudy.measure.markers import annotate
from lmstudy.model_choice import ModelChoice

ENCODER = "tests/fixtures/models/encoder_lm.py:build"
DIMS = {"vocab_size": 64, "d_model": 16, "d_ff": 32, "num_layers": 2, "num_heads": 2}


@pytest.fixture
def nvtx_calls(monkeypatch):
    """Every NVTX push and pop of lmstudy's domain, per thread: their depth must come back to 0."""
    depth: Counter = Counter()
    deepest: Counter = Counter()
    depth.log = []

    def push(name, domain=None):
        depth.log.append("+" + name.removeprefix("module "))
        depth[threading.get_ident()] += 1
        deepest[threading.get_ident()] = max(deepest[threading.get_ident()], depth[threading.get_ident()])

    def pop(domain=None):
        depth.log.append("-")
        depth[threading.get_ident()] -= 1
        assert depth[threading.get_ident()] >= 0, "a pop without its push"

    monkeypatch.setattr(mr.nvtx, "push_range", push)
    monkeypatch.setattr(mr.nvtx, "pop_range", pop)
    return depth, deepest


def train_step(model, ids):
    with annotate("step"):
        with annotate("forward"):
            logits = model(ids)
        loss = logits.float().square().mean()
        with annotate("backward"):
            loss.backward()


def test_each_module_has_a_forward_and_a_backward_range_inside_its_phase(nvtx_calls):
    model = build_model(ModelChoice(factory=ENCODER), DIMS, context_length=8)
    ids = torch.randint(64, (2, 8))
    with torch.profiler.profile() as prof, mr.module_ranges(model, depth=4) as ranges:
        ranges.step(lambda: train_step(model, ids))
    events = prof.events()
    spans = {name: [(e.time_range.start, e.time_range.end) for e in events if e.name == name]
             for name in ("forward", "backward", "module encoder.layers.1.linear2", "module encoder")}
    (forward,), (backward,) = spans["forward"], spans["backward"]
    for module in ("module encoder", "module encoder.layers.1.linear2"):
        inside = Counter("forward" if forward[0] <= s and e <= forward[1]
                         else "backward" if backward[0] <= s and e <= backward[1] else "outside"
                         for s, e in spans[module])
        assert inside == {"forward": 1, "backward": 1}, (module, inside)
    # the backward of linear2 (its weight's matrix product) runs inside linear2's backward range
    (s, e), = [span for span in spans["module encoder.layers.1.linear2"] if span[0] >= backward[0]]
    assert any(s <= ev.time_range.start and ev.time_range.end <= e and "Backward" in ev.name for ev in events)
    depth, deepest = nvtx_calls
    assert sum(depth.values()) == 0 and max(deepest.values()) >= 2
    assert ranges.open_count() == 0


class Raising(nn.Module):
    """A linear layer whose forward or backward raises on demand (out of memory, as on the device)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.fail_in = None

    def forward(self, x):
        if self.fail_in == "forward":
            raise torch.OutOfMemoryError("CUDA out of memory (a test)")
        y = self.linear(x)
        return _FailingBackward.apply(y) if self.fail_in == "backward" else y


class _FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise torch.OutOfMemoryError("CUDA out of memory (a test)")


def small_model():
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(Raising(), nn.ReLU()), nn.Linear(4, 4))
    return model, model[1][0]


@pytest.mark.parametrize("fail_in", ["forward", "backward"])
def test_a_step_that_runs_out_of_memory_leaves_no_range_open(nvtx_calls, fail_in):
    model, raising = small_model()
    x = torch.randn(3, 4, requires_grad=True)
    with mr.module_ranges(model, depth=3) as ranges:
        raising.fail_in = fail_in
        with pytest.raises(torch.OutOfMemoryError):
            ranges.step(lambda: model(x).sum().backward())
        depth, _ = nvtx_calls
        assert sum(depth.values()) == 0 and ranges.open_count() == 0
        raising.fail_in = None  # the next step runs and is balanced too
        ranges.step(lambda: model(x).sum().backward())
        assert sum(depth.values()) == 0 and ranges.open_count() == 0


def test_the_hooks_keep_the_models_behaviour():
    """Inputs that are one tensor stay one object (nn.MultiheadAttention tests `query is key`), an
    in-place operation on a module's output still works, and the gradients are the same."""
    seen = []

    class SameInputs(nn.Module):
        def forward(self, q, k):
            seen.append(q is k)
            return q * k

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True))
    same = SameInputs()
    x = torch.randn(3, 4, requires_grad=True)
    expected = torch.autograd.grad(same(*[model(x)] * 2).sum(), x)[0]
    with mr.module_ranges(nn.ModuleDict({"model": model, "same": same}), depth=2) as ranges:
        got = ranges.step(lambda: torch.autograd.grad(same(*[model(x)] * 2).sum(), x)[0])
    assert seen == [True, True] and torch.equal(got, expected)
    assert not model[0]._forward_pre_hooks  # removed on leaving


def test_a_module_whose_output_is_its_last_childs_opens_its_backward_range_around_the_childs(nvtx_calls):
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)))
    x = torch.randn(3, 4, requires_grad=True)
    with mr.module_ranges(model, depth=2) as ranges:
        out = model(x)
        depth, _ = nvtx_calls
        depth.log.clear()
        ranges.step(lambda: out.sum().backward())
    # "0" and "0.1" open at the same node: the inner is popped and pushed again inside the outer
    pushes = [entry for entry in depth.log if entry != "-"]
    assert pushes[-3:] == ["+0", "+0.1", "+0.0"] and sum(depth.values()) == 0


def test_a_cuda_backwards_module_ranges_on_autograds_thread_are_read_inside_backward():
    """On a GPU, autograd's device thread (2) opens the backward's module ranges, while the main
    thread (1) waits in its backward range: their kernels read as the module's, in the backward."""
    import pandas as pd

    from lmstudy.analyse.nsys.events import Events, kernel_table

    ranges = pd.DataFrame({"thread": [1, 1, 1, 2, 2], "start": [0, 10, 50, 60, 62],
                           "end": [100, 40, 100, 70, 68],
                           "name": ["step", "forward", "backward", "module layers.0", "module layers.0.mlp"]})
    launches = pd.DataFrame({"thread": [1, 2, 2, 2], "start": [20, 61, 65, 80], "end": [21, 62, 66, 81],
                             "correlation": [1, 2, 3, 4]})
    activities = pd.DataFrame({"correlation": [1, 2, 3, 4], "name": ["k_fwd", "k_layer", "k_mlp", "k_tail"],
                               "kind": "kernel", "start": [22, 63, 67, 82], "end": [23, 64, 68, 83]})
    table = kernel_table(Events(ranges, launches, activities)).set_index("kernel")
    assert table.loc["k_mlp", "path"] == "step/backward/module layers.0/module layers.0.mlp"
    assert table.loc["k_layer", "range"] == "module layers.0" and table.loc["k_tail", "range"] == "backward"
    assert set(table["phase"]) == {"forward", "backward"}
    assert table["adopted_instances"].to_dict() == {"k_fwd": 0, "k_layer": 1, "k_mlp": 1, "k_tail": 1}


class _EncoderLM(nn.Module):
    """A language model of nn.TransformerEncoderLayer blocks, as a newcomer writes one."""

    def __init__(self, norm_first: bool):
        super().__init__()
        self.embed = nn.Embedding(64, 32)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first)
            for _ in range(2)
        )
        self.head = nn.Linear(32, 64)

    def forward(self, ids):
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.head(x)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_a_norms_backward_is_attributed_to_the_norm_not_to_the_attention_beside_it(norm_first):
    """The backward of each LayerNorm runs inside its own module's backward range, in a pre-norm block
    (its output feeds self_attn) and a post-norm one (its output feeds the next block): the profiler's
    innermost module range around native_layer_norm_backward is the norm's."""
    torch.manual_seed(0)
    model = _EncoderLM(norm_first)
    ids = torch.zeros(2, 8, dtype=torch.long)
    with mr.module_ranges(model, 4) as ranges, torch.profiler.profile() as profile:
        ranges.step(lambda: model(ids).sum().backward())

    def module_of(event) -> str | None:
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("module "):
            parent = parent.cpu_parent
        return parent.name if parent is not None else None

    owners = [module_of(e) for e in profile.events() if e.name == "aten::native_layer_norm_backward"]
    assert sorted(owners) == [f"module blocks.{i}.norm{n}" for i in (0, 1) for n in (1, 2)]
