"""Section 5: the attention sweep, its memory accounting and OOM handling, on a CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from lmstudy.atomic import write_csv
from lmstudy.measure import attention
from lmstudy.measure.model import scaled_dot_product_attention
from lmstudy.report.answers import Answers
from lmstudy.report.render import Figure, Findings, Table
from lmstudy.report.sections import attention as section

REPO = Path(__file__).resolve().parent.parent
IMPOSSIBLE_D = 2**30  # q alone would need 256 GiB at batch 2, seq 32


def _qkv(batch=2, seq=16, d=8, dtype=torch.float32, grad=False):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(batch, 1, seq, d, generator=g, dtype=dtype).requires_grad_(grad) for _ in range(3)]


def test_naive_attention_is_the_models_causal_attention_and_sdpas():
    q, k, v = _qkv()
    mask = torch.ones(16, 16, dtype=torch.bool).tril()
    ours = attention.naive_attention(q, k, v)
    torch.testing.assert_close(ours, scaled_dot_product_attention(q, k, v, mask))
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    # Causal: the first position sees only itself.
    torch.testing.assert_close(ours[:, :, 0], v[:, :, 0])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_accounting_of_saved_tensors_matches_what_autograd_saves(precision):
    batch, seq, d = 2, 24, 8
    q, k, v = _qkv(batch, seq, d, attention.DTYPES[precision], grad=True)
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attention.naive_attention(q, k, v)
    predicted = attention.predicted_bytes(batch, seq, d, precision)
    assert sum(storages.values()) == predicted["saved"]
    # The S x S part grows with the square of the sequence length.
    longer = attention.predicted_bytes(batch, 2 * seq, d, precision)
    table = attention.naive_memory_accounting(batch, 2 * seq, d, precision)
    probs = next(r for r in table if r["tensor"].startswith("softmax output"))
    assert probs["bytes"] == batch * (2 * seq) ** 2 * attention.BYTES[precision]
    assert longer["before_backward"] < longer["peak"]


def test_sdpa_backend_read_off_the_dispatched_operator():
    assert attention.sdpa_backend_of({"aten::_scaled_dot_product_flash_attention"}) == "flash"
    assert attention.sdpa_backend_of({"aten::_scaled_dot_product_efficient_attention"}) == "memory-efficient"
    assert attention.sdpa_backend_of({"aten::_scaled_dot_product_cudnn_attention"}) == "cuDNN"
    assert attention.sdpa_backend_of({"aten::mm", "aten::softmax"}) == "unknown"
    q, k, v = _qkv()
    assert attention.sdpa_backend(q, k, v) == "flash"  # the CPU's flash kernel
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        assert attention.sdpa_backend(q, k, v) == "math"


@pytest.fixture(scope="module")
def sweep_rows():
    rows = []
    for impl in ("naive", "sdpa"):
        for d in (8, IMPOSSIBLE_D):
            spec = attention.SweepSpec(
                implementation=impl,
                precision="fp32",
                head_dim=d,
                seq_lens=(32, 16),
                batch_size=2,
                steps=3,
                warmup=1,
                device="cpu",
            )
            rows += attention.run_sweep(spec)
    return pd.DataFrame(rows)


def test_sweep_measures_each_sequence_length_and_records_oom(sweep_rows):
    ok = sweep_rows[sweep_rows["head_dim"] == 8]
    assert list(ok["seq_len"]) == [16, 32, 16, 32]  # ascending within each job
    assert (ok["status"] == "ok").all()
    assert (ok["forward_median_ms"] > 0).all() and (ok["backward_median_ms"] > 0).all()
    assert set(ok[ok["implementation"] == "sdpa"]["sdpa_backend"]) == {"flash"}
    oom = sweep_rows[sweep_rows["head_dim"] == IMPOSSIBLE_D]
    assert len(oom) == 4 and (oom["status"] == "OOM").all()
    assert oom["error"].str.contains("allocate").all()
    assert (sweep_rows["gpu"].str.startswith("cpu")).all()  # provenance on every row


def test_spec_rejects_an_unknown_implementation():
    with pytest.raises(ValueError, match="implementation must be one of"):
        attention.SweepSpec(implementation="flash", precision="fp32", head_dim=8, seq_lens=(16,))


def test_naive_compile_runs_and_records_its_first_call():
    spec = attention.SweepSpec(
        implementation="naive-compile",
        precision="fp32",
        head_dim=8,
        seq_lens=(16,),
        batch_size=2,
        steps=2,
        warmup=1,
        device="cpu",
    )
    (row,) = attention.run_sweep(spec)
    assert row["status"] == "ok"
    # The first call traces and compiles: far slower than a steady call.
    assert row["first_call_ms"] > row["forward_median_ms"] + row["backward_median_ms"]


def test_section_from_real_rows(sweep_rows, tmp_path):
    write_csv(tmp_path / "attention" / "attention.csv", sweep_rows)
    figures = tmp_path / "figures"
    section.make_figures(tmp_path, figures)
    assert (figures / "time.png").stat().st_size > 0
    built = section.build(tmp_path, figures)
    findings = next(b for b in built.blocks if isinstance(b, Findings)).items
    assert any(
        "naive eager ran out of memory in 2 of 4" in f and f"d={IMPOSSIBLE_D}, seq 16" in f for f in findings
    )
    assert any("SDPA in fp32 dispatched to the flash backend" in f for f in findings)
    answers = next(b for b in built.blocks if isinstance(b, Answers)).items
    backend = "The backend SDPA dispatched to, by precision: fp32: flash in"
    assert any(a.text.startswith(backend) for a in answers)
    assert any(f"runs out of memory from seq 16 (d={IMPOSSIBLE_D})" in a.text for a in answers)
    tables = {b.caption: b.frame for b in built.blocks if isinstance(b, Table)}
    accounting = next(f for c, f in tables.items() if c.startswith("Memory accounting of the smallest"))
    expected = attention.predicted_bytes(2, 16, IMPOSSIBLE_D, "fp32")["before_backward"]
    held = accounting[accounting["held"] == "before backward"]
    assert held["MiB"].sum() * 2**20 == pytest.approx(expected)
    main = next(f for c, f in tables.items() if c.startswith("Forward and backward"))
    assert (main[main["d"] == IMPOSSIBLE_D]["naive eager fwd ms"] == "OOM").all()
    assert all(b.path.exists() for b in built.blocks if isinstance(b, Figure))


def test_oom_threshold_follows_the_accounting():
    seq = section.oom_threshold(8, 64, "fp32", 80 * 2**30)
    assert attention.predicted_bytes(8, seq, 64, "fp32")["peak"] > 80 * 2**30
    assert attention.predicted_bytes(8, seq // 2, 64, "fp32")["peak"] <= 80 * 2**30


def test_script_help_and_a_run(tmp_path):
    script = REPO / "scripts" / "attention_sweep.py"
    assert (
        "--seq-lens"
        in subprocess.run(
            [sys.executable, script, "--help"], capture_output=True, text=True, check=True
        ).stdout
    )
    out = tmp_path / "a.csv"
    subprocess.run(
        [
            sys.executable,
            script,
            "--out",
            out,
            "--implementation",
            "sdpa",
            "--head-dim",
            "8",
            "--seq-lens",
            "16",
            "--batch-size",
            "2",
            "--steps",
            "2",
            "--warmup",
            "0",
            "--device",
            "cpu",
        ],
        check=True,
        capture_output=True,
    )
    assert pd.read_csv(out)["status"].tolist() == ["ok"]
    bad = subprocess.run(
        [
            sys.executable,
            script,
            "--out",
            out,
            "--implementation",
            "sdpa",
            "--head-dim",
            "8",
            "--seq-lens",
            "16",
            "--steps",
            "1",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: --steps")
