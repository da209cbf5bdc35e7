"""Mixed-precision experiments (section 3), run for real on this machine's CPU."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pandas as pd
import pytest
import torch

from lmstudy.measure import precision
from lmstudy.sections.precision import section

from .specs import spec_fields

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def accumulation():
    return {row["method"]: row for row in precision.accumulation(CPU)}


def test_accumulation_results(accumulation):
    fp32 = accumulation["fp32 into fp32"]
    fp16 = accumulation["fp16 into fp16"]
    mixed = accumulation["fp16 into an fp32 accumulator"]
    upcast = accumulation["fp16 upcast to fp32, then added"]
    assert fp32["accumulator_dtype"] == "float32" and fp16["accumulator_dtype"] == "float16"
    # fp16 loses the small increments once the sum grows: the largest error by far.
    assert fp16["abs_error"] > 10 * mixed["abs_error"] > 10 * fp32["abs_error"]
    assert fp16["result"] < 10
    # Adding fp16 to fp32 promotes it: the same as upcasting first.
    assert mixed["result"] == upcast["result"]
    # ... and that error is the fp16 representation of 0.01, times a thousand.
    assert mixed["result"] == pytest.approx(1000 * mixed["increment_as_stored"], rel=1e-5)


def test_toy_model_dtypes_are_observed():
    rows = precision.toy_model_dtypes(CPU, "bf16")
    dtypes = {row["tensor"]: row["dtype"] for row in rows}
    assert dtypes["parameter fc1.weight"] == "float32"
    assert dtypes["output of fc1 (Linear)"] == "bfloat16"
    assert dtypes["logits"] == "bfloat16"
    assert dtypes["loss"] == "float32"
    assert all(dtypes[f"gradient of {n}"] == "float32" for n in ("fc1.weight", "fc2.weight", "ln.weight"))
    # Every layer's output was seen by a hook, in call order.
    outputs = [row["tensor"] for row in rows if row["tensor"].startswith("output of")]
    assert outputs == [
        "output of fc1 (Linear)",
        "output of relu (ReLU)",
        "output of ln (LayerNorm)",
        "output of fc2 (Linear)",
    ]


def test_unsupported_autocast_is_not_run():
    # CPU autocast has no float64 policy: torch disables it, and the rows say so.
    reason = precision._autocast_support(CPU, torch.float64)
    assert reason
    precision.AUTOCAST_DTYPES["fp64-test"] = torch.float64
    try:
        rows = precision.toy_model_dtypes(CPU, "fp64-test")
    finally:
        del precision.AUTOCAST_DTYPES["fp64-test"]
    assert rows == [{"precision": "fp64-test", "tensor": "(all)", "dtype": "not run", "note": reason}]


def test_script_and_section(tmp_path):
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lmstudy",
            "measure",
            "precision",
            "--spec",
            json.dumps(spec_fields("precision")),
            "--accumulation",
            str(results / "precision/accumulation.csv"),
            "--dtypes",
            str(results / "precision/toy_dtypes.csv"),
            "--model-dtypes",
            str(results / "precision/model_dtypes.csv"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    accumulation = pd.read_csv(results / "precision/accumulation.csv")
    assert {"gpu", "torch", "commit"} <= set(accumulation.columns)
    built = section.build(results, tmp_path / "figures")
    text = " ".join(
        " ".join(getattr(i, "text", i) for i in b.items) if hasattr(b, "items") else getattr(b, "text", "")
        for b in built.blocks
    )
    worst = accumulation.loc[accumulation["abs_error"].idxmax()]
    assert worst["method"] == "fp16 into fp16"
    assert f"{worst['result']:.4f}" in text
    assert "the loss is float32" in text
    # Without timing results the speed-up part says why it is absent, as does the answer (c).
    assert "No bf16 vs fp32 speed-ups" in text
    assert "Not answered: the timing section did not measure fp32 and a lower precision" in text
    tables = [b for b in built.blocks if hasattr(b, "frame")]
    dtypes = tables[1].frame.set_index("tensor")
    assert dtypes.loc["loss", "bf16 autocast"] == "float32"
    # The study's model (the built-in one, the smoke preset's smallest size) after the toy model.
    model = pd.read_csv(results / "precision/model_dtypes.csv")
    assert set(model["size"]) == {"tiny"} and set(model["model"]) == {"lmstudy built-in Transformer LM"}
    assert tables[2].caption == "Dtypes under autocast in lmstudy built-in Transformer LM"
    built_in = tables[2].frame.set_index("tensor")
    assert built_in.loc["output of layers.*.ln1 (RMSNorm)", "bf16 autocast"] == "float32"
    assert built_in.loc["output of layers.*.attn (CausalSelfAttention)", "fp16 autocast"] == "float16"
    assert "RMSNorm (layers.*.ln1, layers.*.ln2, ln_final)" in text


def test_dtype_table_shows_not_run():
    frame = pd.DataFrame(
        [
            {"precision": "fp16", "tensor": "(all)", "dtype": "not run", "note": "no fp16 here"},
            {"precision": "bf16", "tensor": "logits", "dtype": "bfloat16", "note": ""},
        ]
    )
    table = section.dtype_table(frame).set_index("tensor")
    assert table.loc["logits", "fp16 autocast"] == "not run: no fp16 here"
    assert table.loc["logits", "bf16 autocast"] == "bfloat16"
    assert any("not run here" in f for f in section.dtype_findings(frame))


def test_norm_errors_find_the_fp16_overflow_in_the_squares_and_none_in_bf16():
    from lmstudy.measure import norm_precision

    torch.manual_seed(0)
    x = torch.randn(16, 64)
    rows = pd.DataFrame(norm_precision.norm_errors(x, scales=(1.0, 1000.0)))
    every = rows[rows["low_precision_op"] == norm_precision.ALL].set_index(["norm", "precision", "scale"])
    # |x| up to ~3000: x² overflows fp16's 65504 (the output is lost), never bf16's range.
    assert every.loc[("RMSNorm", "fp16", 1000.0), "error_mean"] > 0.5
    assert every.loc[("RMSNorm", "bf16", 1000.0), "error_mean"] < 0.02
    big = rows[(rows["scale"] == 1000.0) & (rows["precision"] == "fp16") & (rows["norm"] == "RMSNorm")]
    lost = set(big.loc[big["error_mean"] > 0.5, "low_precision_op"])
    assert "square" in lost and "input" not in lost and "gain" not in lost
    # At the activations' own scale every error is of the order of the format's rounding.
    small = every.xs(1.0, level="scale")["error_mean"]
    assert (small.xs("fp16", level="precision") < 2e-3).all()
    assert (small.xs("bf16", level="precision") < 2e-2).all()
    assert (small.xs("bf16", level="precision") > small.xs("fp16", level="precision")).all()


def test_the_model_s_activations_are_the_input_of_its_final_norm():
    from lmstudy.measure import norm_precision
    from lmstudy.measure.model import ModelConfig, TransformerLM

    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=32, context_length=8, d_model=16, d_ff=32, num_layers=1,
                                      num_heads=2))
    tokens = torch.randint(32, (2, 8))
    x = norm_precision.model_activations(model, tokens)
    assert x.shape == (2, 8, 16) and x.dtype == torch.float32
    with torch.no_grad():
        assert torch.allclose(model.lm_head(model.ln_final(x)), model(tokens))


def test_fp16_is_a_timing_precision_with_the_tensor_core_peak():
    from lmstudy import hardware
    from lmstudy.measure.steps import autocast_context

    with autocast_context("fp16", CPU):
        out = torch.ones(4, 4) @ torch.ones(4, 4)
    assert out.dtype == torch.float16
    gpu = "NVIDIA H100 80GB HBM3"
    assert hardware.peak_tflops(gpu, "fp16", False) == hardware.peak_tflops(gpu, "bf16", False) == 989.4
    with pytest.raises(ValueError):
        autocast_context("fp8", CPU)


# Issue 25: the dtypes under autocast of any model, observed through hooks on its own modules.
TINY = dict(vocab_size=64, context_length=16, d_model=32, d_ff=64, num_layers=2, num_heads=4)


def model_rows(choice, precision_name):
    from lmstudy.measure.model import ModelConfig

    rows = precision.model_dtypes(choice, ModelConfig(**TINY), CPU, precision_name)
    return rows, {row["tensor"]: row["dtype"] for row in rows}


def test_the_dtypes_of_a_model_of_the_user_s_own():
    from lmstudy.model_choice import ModelChoice

    choice = ModelChoice(factory="tests/fixtures/models/encoder_lm.py:build", range_depth=4)
    rows, dtypes = model_rows(choice, "bf16")
    # The LM head is an nn.Linear: autocast runs it in bf16; its tied weight stays stored in fp32.
    assert dtypes["output of head (Linear)"] == dtypes["logits"] == "bfloat16"
    assert dtypes["parameter embed.weight"] == "float32"
    # The post-norm encoder layers end in LayerNorm, which autocast keeps in fp32.
    assert dtypes["output of encoder.layers.0 (TransformerEncoderLayer)"] == "float32"
    assert dtypes["loss"] == "float32"
    params = [r for r in rows if r["tensor"].startswith("parameter ")]
    grads = [r for r in rows if r["tensor"].startswith("gradient of ")]
    assert len(params) == len(grads) > 10
    assert {r["dtype"] for r in params} == {r["dtype"] for r in grads} == {"float32"}
    # Depth 4 is capped at 3: the encoder layers' own submodules are not hooked.
    outputs = [r["tensor"] for r in rows if r["tensor"].startswith("output of")]
    assert max(t.split(" ")[2].count(".") for t in outputs) == 2
    assert not any("linear1" in t for t in outputs)
    # Depth 1: the model's children only.
    shallow = dataclasses.replace(choice, range_depth=1)
    _, dtypes = model_rows(shallow, "fp16")
    outputs = [t for t in dtypes if t.startswith("output of")]
    assert outputs == ["output of embed (Embedding)", "output of encoder (TransformerEncoder)",
                       "output of head (Linear)"]
    assert dtypes["output of head (Linear)"] == "float16"


def test_the_dtypes_of_the_built_in_model():
    from lmstudy.model_choice import ModelChoice

    rows, dtypes = model_rows(ModelChoice(), "bf16")  # range_depth 0: depth 3
    assert dtypes["output of layers.0.attn (CausalSelfAttention)"] == "bfloat16"
    assert dtypes["output of layers.1.ffn (SwiGLU)"] == "bfloat16"
    assert dtypes["output of lm_head (Linear)"] == "bfloat16"
    # RMSNorm computes in fp32 and returns its input's dtype: the residual stream's, fp32.
    assert dtypes["output of layers.0.ln1 (RMSNorm)"] == dtypes["output of ln_final (RMSNorm)"] == "float32"
    assert dtypes["output of layers.0 (TransformerBlock)"] == "float32"
    assert dtypes["loss"] == "float32" and dtypes["parameter lm_head.weight"] == "float32"
    assert dtypes["gradient of lm_head.weight"] == "float32"
    table = section.model_dtype_table(pd.DataFrame([{**r, "model": "m", "size": "t", "context_length": 16}
                                                    for r in rows]))
    assert table["tensor"].iloc[0] == "all 21 parameters"
    assert "output of layers.*.attn (CausalSelfAttention)" in set(table["tensor"])


def test_the_model_dtype_table_and_sentence_from_a_hand_made_table():
    where = {"model": "my-model", "size": "small", "context_length": 128}
    rows = [
        ("parameter layers.0.w.weight", "float32", "float32"),
        ("parameter layers.1.w.weight", "float32", "float32"),
        ("output of layers.0.norm (MyNorm)", "float32", "float32"),
        ("output of layers.0.w (Linear)", "float16", "bfloat16"),
        ("output of layers.1.norm (MyNorm)", "float32", "float32"),
        ("output of layers.1.w (Linear)", "float16", "float32"),  # a block the autocast left in fp32
        ("logits", "float16", "bfloat16"),
        ("loss", "float32", "float32"),
        ("gradient of layers.0.w.weight", "float32", "float32"),
        ("gradient of layers.1.w.weight", "float32", "float32"),
    ]
    frame = pd.DataFrame(
        [{**where, "precision": p, "tensor": t, "dtype": fp16 if p == "fp16" else bf16, "note": ""}
         for p in ("fp16", "bf16") for t, fp16, bf16 in rows]
    )
    table = section.model_dtype_table(frame).set_index("tensor")
    assert list(table.index) == ["all 2 parameters", "output of layers.*.norm (MyNorm)",
                                 "output of layers.*.w (Linear)", "logits", "loss", "all 2 gradients"]
    assert table.loc["output of layers.*.w (Linear)", "fp16 autocast"] == "float16"
    assert table.loc["output of layers.*.w (Linear)", "bf16 autocast"] == "bfloat16 ×1, float32 ×1"
    assert table.loc["output of layers.*.w (Linear)", "tensors"] == 2
    [sentence] = section.model_dtype_findings(frame)
    assert sentence.startswith("In my-model (size small, context 128), under fp16 autocast, the outputs of "
                               "Linear (layers.*.w) were float16 while those of MyNorm (layers.*.norm) "
                               "stayed float32")
    assert "under bf16 autocast, the outputs of no module were bfloat16" in sentence
    assert "Linear (layers.*.w) bfloat16 ×1, float32 ×1" in sentence
    # An autocast the device lacks: its column says so, and the sentence.
    gone = pd.concat([frame[frame["precision"] == "fp16"], pd.DataFrame(
        [{**where, "precision": "bf16", "tensor": "(all)", "dtype": "not run", "note": "no bf16 here"}])])
    table = section.model_dtype_table(gone).set_index("tensor")
    assert (table["bf16 autocast"] == "not run: no bf16 here").all()
    assert "bf16 autocast was not run (no bf16 here)" in section.model_dtype_findings(gone)[0]
    # The section shows it under the model's name.
    blocks = section.model_dtypes_part(frame)
    assert blocks[-1].caption == "Dtypes under autocast in my-model"
