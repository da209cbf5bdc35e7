"""The model factory (config model:): loading, its error sentences, FlopCounterMode's FLOPs, module ranges."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest
import torch

from lmstudy import code_version, flops
from lmstudy.errors import UserError
from lmstudy.measure.factory import (
    NotApplicable,
    build_model,
    count_flops,
    count_on_meta,
    load_factory,
    logits_of,
    parameters_on_meta,
)
from lmstudy.measure.module_ranges import module_ranges
from lmstudy.model_choice import ModelChoice, choice_from_config, factory_file

from .specs import spec_for

ENCODER = "tests/fixtures/models/encoder_lm.py:build"
DIMS = {"vocab_size": 64, "d_model": 16, "d_ff": 32, "num_layers": 2, "num_heads": 2}


def write_factory(tmp_path: Path, body: str) -> str:
    path = tmp_path / "factory_under_test.py"
    path.write_text("import torch\nfrom torch import nn\n" + textwrap.dedent(body))
    return f"{path}:build"


def one_sentence(error: pytest.ExceptionInfo, reference: str) -> str:
    message = str(error.value)
    assert "\n" not in message and message.endswith(".")
    assert reference in message
    return message


def test_a_file_reference_relative_to_the_project_root_builds_a_model():
    model = build_model(ModelChoice(factory=ENCODER), DIMS, context_length=8)
    ids = torch.randint(64, (2, 8))
    assert logits_of(model(ids), ids, 64, ENCODER).shape == (2, 8, 64)


@pytest.mark.parametrize(("body", "expected"), [
    ("raise RuntimeError('no GPU here')\n", "could not be imported: RuntimeError: no GPU here"),
    ("def other(**kw):\n    pass\n", "has no function 'build'"),
    ("def build(**kw):\n    raise ValueError('d_model too small')\n", "failed when called with"),
    ("def build(**kw):\n    return 42\n", "returned a int, not a torch.nn.Module"),
])
def test_a_broken_factory_stops_with_one_sentence_naming_it(tmp_path, body, expected):
    reference = write_factory(tmp_path, body)
    load_factory.cache_clear()
    with pytest.raises(UserError) as error:
        build_model(ModelChoice(factory=reference), DIMS, context_length=8)
    assert expected in one_sentence(error, reference)


def test_a_missing_file_and_a_malformed_reference_name_the_fix(tmp_path):
    missing = f"{tmp_path}/nowhere.py:build"
    with pytest.raises(UserError) as error:
        load_factory(missing)
    assert "does not exist" in one_sentence(error, missing)
    with pytest.raises(UserError) as error:
        load_factory("my_model_without_function")
    assert "must be 'path/to/file.py:function'" in one_sentence(error, "my_model_without_function")


@pytest.mark.parametrize(("forward", "expected"), [
    ("return {'scores': ids}", "returned a dict from its forward, not logits"),
    ("return torch.zeros(ids.shape[0], ids.shape[1], 3)", "returned logits of shape [2, 8, 3]"),
    ("return (torch.zeros(ids.shape[0], 64),)", "returned logits of shape [2, 64]"),
])
def test_a_model_whose_output_is_not_logits_of_the_batch_stops_with_one_sentence(tmp_path, forward, expected):
    reference = write_factory(tmp_path, f"""
        class Odd(nn.Module):
            def forward(self, ids):
                {forward}

        def build(**kw):
            return Odd()
    """)
    load_factory.cache_clear()
    model = build_model(ModelChoice(factory=reference), DIMS, context_length=8)
    ids = torch.zeros(2, 8, dtype=torch.long)
    with pytest.raises(UserError) as error:
        logits_of(model(ids), ids, 64, reference)
    assert expected in one_sentence(error, reference)


def test_logits_in_a_tuple_or_an_object_with_logits_are_accepted():
    ids = torch.zeros(2, 8, dtype=torch.long)
    logits = torch.zeros(2, 8, 64)

    class Output:
        pass

    output = Output()
    output.logits = logits
    assert logits_of((logits, None), ids, 64, "f") is logits
    assert logits_of(output, ids, 64, "f") is logits


def test_switching_attention_needs_a_factory_that_takes_it():
    with pytest.raises(NotApplicable, match="attention"):
        build_model(ModelChoice(factory=ENCODER), DIMS, context_length=8, attention="sdpa")
    builtin = build_model(ModelChoice(), DIMS, context_length=8, attention="sdpa")
    assert builtin.layers[0].attn.use_sdpa


@pytest.mark.parametrize("dims", [DIMS, {"vocab_size": 100, "d_model": 48, "d_ff": 80, "num_layers": 3,
                                         "num_heads": 4}])
def test_flop_counter_equals_the_built_in_formula(dims):
    counted = count_on_meta(ModelChoice(), dims, context_length=16, batch_size=3)
    for pass_name in ("forward", "forward_backward", "train_step"):
        assert counted[pass_name] == flops.flops_per_step(pass_name, 3, 16, **dims)
    assert counted["parameters"] == flops.parameter_count(**dims)


def test_a_model_of_ones_own_is_counted_on_the_meta_device_with_all_its_parameters():
    counted = count_on_meta(ModelChoice(factory=ENCODER), DIMS, context_length=8, batch_size=2)
    model = build_model(ModelChoice(factory=ENCODER), DIMS, context_length=8)
    assert counted["parameters"] == sum(p.numel() for p in model.parameters())
    # Backward costs twice the forward's matrix products, give or take the first layer's input gradient.
    assert 2 * counted["forward"] < counted["train_step"] <= 3 * counted["forward"]


def test_module_ranges_name_the_modules_down_to_the_depth():
    model = build_model(ModelChoice(factory=ENCODER), DIMS, context_length=8)
    ids = torch.zeros(1, 8, dtype=torch.long)
    with torch.profiler.profile() as prof, module_ranges(model, depth=4):
        model(ids)
    names = {event.name for event in prof.events()}
    assert {"module encoder", "module encoder.layers.0.self_attn", "module encoder.layers.1.linear2"} <= names
    assert not any(name.startswith("module encoder.layers.0.self_attn.") for name in names)
    model(ids)  # the hooks are gone: nothing left open
    assert not model._forward_pre_hooks


def test_choice_from_config_passes_a_sizes_own_keys_and_picks_the_range_depth():
    choice = choice_from_config({"factory": ENCODER, "name": "enc", "range_depth": None},
                                {"d_model": 16, "d_ff": 32, "num_layers": 2, "num_heads": 2, "rope": 5})
    assert choice.extra == (("rope", 5),) and choice.range_depth == 4 and choice.label == "enc"
    assert choice_from_config(None, {"d_model": 1}).range_depth == 0
    assert ModelChoice.from_json(choice.to_json()) == choice


def test_the_factory_digest_follows_its_file_and_ignores_comments(tmp_path):
    reference = write_factory(tmp_path, "def build(**kw):\n    return nn.Linear(1, 1)\n")
    path = factory_file(reference)
    before = code_version.factory_digest(reference)
    path.write_text(path.read_text() + "# a comment\n")
    code_version._code_digest.cache_clear()
    code_version.modules_of.cache_clear()
    assert code_version.factory_digest(reference) == before
    path.write_text(path.read_text().replace("(1, 1)", "(1, 2)"))
    code_version._code_digest.cache_clear()
    code_version.modules_of.cache_clear()
    assert code_version.factory_digest(reference) != before


@pytest.mark.parametrize("factory", ["llama", "qwen2", "gpt2"])
def test_a_hugging_face_model_is_built_from_its_config_class_with_the_sizes_dimensions(factory):
    pytest.importorskip("transformers", reason='transformers is an optional extra: pip install -e ".[hf]"')
    reference = f"lmstudy.measure.hf_factory:{factory}"
    choice = ModelChoice(factory=reference)
    model = build_model(choice, DIMS, context_length=8, attention="sdpa")
    ids = torch.randint(64, (2, 8))
    assert logits_of(model(ids), ids, 64, reference).shape == (2, 8, 64)
    # Its parameters on the meta device; its FLOPs where it runs (its masks read values: not on meta).
    assert parameters_on_meta(choice, DIMS, context_length=8) == sum(p.numel() for p in model.parameters())
    counted = count_flops(model, 2, 8, 64, reference)
    assert counted["forward"] > 0 and counted["train_step"] > 2 * counted["forward"]


def test_a_factory_out_of_memory_is_a_result_not_a_broken_factory(tmp_path):
    """The smoke preset's oversized model fails in its factory on the CPU: out of memory, a result."""
    from lmstudy.measure.devices import is_out_of_memory

    reference = write_factory(tmp_path, """
        def build(**kw):
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes.")
    """)
    load_factory.cache_clear()
    with pytest.raises(RuntimeError) as error:
        build_model(ModelChoice(factory=reference), DIMS, context_length=8)
    assert not isinstance(error.value, UserError) and is_out_of_memory(error.value)


@pytest.mark.parametrize("job", ["timing", "compile"])
def test_an_sdpa_variant_of_a_model_without_an_attention_keyword_is_not_applicable_rows(tmp_path, job):
    """As the ladder's rungs: rows that say why, nothing measured, and files the aggregation accepts."""
    import pandas as pd

    from lmstudy.analyse.result_files import check, product_of
    from lmstudy.measure import compile_bench, timing
    from lmstudy.measure.repeat import NoisePolicy

    common = dict(size="tiny", **{k: DIMS[k] for k in ("d_model", "d_ff", "num_layers", "num_heads")},
                  vocab_size=64, context_length=8, batch_size=2, precision="fp32", device="cpu",
                  model=ModelChoice(factory=ENCODER, name="enc"))
    if job == "timing":
        spec = spec_for("timing", **common, variant="sdpa", warmup_steps=(0, 2), timed_steps=2)
        rows, path = timing.run_job(spec), tmp_path / "timing/raw/tiny.csv"
        assert {(r["pass"], r["warmup_steps"]) for r in rows} == {(p, w) for p in spec.passes for w in (0, 2)}
    else:
        spec = spec_for("compile", **common, attention="sdpa", passes=("forward",), timed_steps=2)
        rows = compile_bench.run_job_in_processes(spec, NoisePolicy(1, 1, 0.05, None))
        path = tmp_path / "compile/raw/tiny.csv"
        assert {(r["mode"], r["pass"]) for r in rows} == {(m, "forward") for m in compile_bench.MODES}
    assert {r["status"] for r in rows} == {"not applicable"}
    assert all(r["error"].startswith("enc: switching the attention to sdpa needs a factory") for r in rows)
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    check(pd.read_csv(path), product_of(path), path)
    naive = dataclasses.replace(spec, **({"variant": "naive"} if job == "timing" else {"attention": "naive"}))
    assert naive.not_applicable() is None


# Issue 32, item 8: a factory's module or call that exits or raises KeyboardInterrupt is a clear error,
# never a job that exits 0 without its outputs.
@pytest.mark.parametrize(("body", "expected"), [
    ("import sys\nsys.exit(0)\n", "it called sys.exit(0) (SystemExit) while its module was imported"),
    ("raise KeyboardInterrupt\n", "it raised KeyboardInterrupt while its module was imported"),
    ("def build(**kw):\n    raise SystemExit(3)\n", "it called sys.exit(3) (SystemExit) when called with"),
])
def test_a_factory_that_exits_stops_with_one_sentence_naming_it(tmp_path, body, expected):
    reference = write_factory(tmp_path, body)
    load_factory.cache_clear()
    with pytest.raises(UserError) as error:
        build_model(ModelChoice(factory=reference), DIMS, context_length=8)
    assert expected in one_sentence(error, reference)


# Issue 32, item 15: a factory may be set with --config or a --configfile, not only in config.yaml.
def test_a_bad_factory_is_told_to_fix_it_where_it_was_set(tmp_path):
    missing = f"{tmp_path}/nowhere.py:build"
    with pytest.raises(UserError) as error:
        load_factory(missing)
    message = str(error.value)
    assert "in config.yaml" not in message and "(config.yaml, a --configfile or --config)" in message


# Issue 32, item 6: a model that fails in its forward or has no backward is named in one sentence.
LINEAR = "        self.head = nn.Linear(4, 64)\n"
HEAD = "def forward(self, ids{}):\n        return self.head(torch.ones(*ids.shape, 4, device=ids.device)){}"
BROKEN_MODELS = {
    "extra forward argument": (
        LINEAR, HEAD.format(", mask", ""),
        "failed in its forward, called with token ids of shape [2, 8] only: TypeError: "),
    "detached logits": (
        LINEAR, HEAD.format("", ".detach()"),
        "returned logits that do not require grad (detached"),
    "integer logits": (
        LINEAR, HEAD.format("", ".long()"),
        "returned logits of dtype torch.int64"),
    "no parameters": (
        "", "def forward(self, ids):\n        return torch.nn.functional.one_hot(ids, 64).float() * 2.0",
        "has no parameter that requires grad, so it has no backward to measure: measure its forward"),
}


def write_model(tmp_path: Path, init: str, forward: str) -> str:
    return write_factory(tmp_path, (
        "class Odd(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n" + init +
        "    " + forward + "\n\n"
        "def build(**kw):\n"
        "    return Odd()\n"
    ))


def _workload(reference: str):
    from lmstudy.measure.model import ModelConfig
    from lmstudy.measure.steps import build_workload

    config = ModelConfig(context_length=8, **DIMS)
    return build_workload(config, 2, "fp32", torch.device("cpu"), choice=ModelChoice(factory=reference))


@pytest.mark.parametrize("case", sorted(BROKEN_MODELS))
def test_a_model_that_fails_in_its_forward_or_backward_is_named_in_one_sentence(tmp_path, case):
    from lmstudy.measure.steps import make_step

    init, forward, expected = BROKEN_MODELS[case]
    reference = write_model(tmp_path, init, forward)
    load_factory.cache_clear()
    work = _workload(reference)
    for pass_name in ("forward_backward", "train_step"):
        with pytest.raises(UserError) as error:
            make_step(work, pass_name)()
        assert expected in one_sentence(error, reference)
    if case == "no parameters":  # its forward pass is counted and measured
        counted = count_on_meta(ModelChoice(factory=reference), DIMS, context_length=8, batch_size=2)
        assert counted["parameters"] == 0 and counted["train_step"] is None
        make_step(work, "forward")()
    else:  # counting stops with the same sentence, or counts the forward and leaves the backward
        try:
            counted = count_on_meta(ModelChoice(factory=reference), DIMS, context_length=8, batch_size=2)
        except UserError as raised:
            assert expected in str(raised)
        else:
            assert counted["train_step"] is None


# Issue 32, item 3: a model built in bf16 is refused where it is built, not timed and labelled fp32.
@pytest.mark.parametrize("cast", [".to(torch.bfloat16)", ".half()"])
def test_a_factory_that_returns_a_half_precision_model_is_refused_naming_the_dtype(tmp_path, cast):
    reference = write_factory(tmp_path, f"""
        import importlib
        def build(**kw):
            builtin = importlib.import_module("lmstudy.measure.model")
            return builtin.build(**kw){cast}
    """)
    load_factory.cache_clear()
    with pytest.raises(UserError) as error:
        _workload(reference)
    dtype = "torch.bfloat16" if "bfloat16" in cast else "torch.float16"
    assert f"returned a model with {dtype} parameters" in one_sentence(error, reference)
    assert "return the model in fp32" in str(error.value)


# Issue 32, item 5: the factory's own helper modules are followed for invalidation, without importing them.
def _edited(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new))
    code_version._code_digest.cache_clear()
    code_version.modules_of.cache_clear()


def test_the_factory_digest_follows_the_helper_modules_of_its_package(tmp_path, monkeypatch):
    package = tmp_path / "mypkg"
    (package / "parts").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "parts/__init__.py").write_text("")
    (package / "model.py").write_text(
        "import torch\nfrom .layers import width\nfrom mypkg.parts import head\n\n"
        "def build(**kw):\n    return head.make(width())\n")
    (package / "layers.py").write_text("def width():\n    return 4\n")
    (package / "parts/head.py").write_text("import torch\n\ndef make(n):\n    return torch.nn.Linear(n, 1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reference = "mypkg.model:build"
    before = code_version.factory_digest(reference)
    _edited(package / "layers.py", "return 4", "return 4  # a comment")
    assert code_version.factory_digest(reference) == before
    _edited(package / "layers.py", "return 4", "return 8")
    after_layers = code_version.factory_digest(reference)
    assert after_layers != before
    _edited(package / "parts/head.py", "(n, 1)", "(n, 2)")
    assert code_version.factory_digest(reference) != after_layers


def test_the_factory_digest_follows_a_factory_files_sibling_module(tmp_path):
    (tmp_path / "helpers.py").write_text("SIZE = 4\n")
    body = "import helpers\n\ndef build(**kw):\n    return nn.Linear(helpers.SIZE, 1)\n"
    reference = write_factory(tmp_path, body)
    before = code_version.factory_digest(reference)
    _edited(tmp_path / "helpers.py", "4", "5")
    assert code_version.factory_digest(reference) != before
