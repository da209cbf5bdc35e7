"""Section 5: the attention sweep, its memory accounting and OOM handling, on a CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from lmstudy.analyse.attention_memory import fit_constant_plus_power
from lmstudy.atomic import write_csv
from lmstudy.measure import attention
from lmstudy.measure.model import scaled_dot_product_attention
from lmstudy.report.answers import Answers
from lmstudy.report.render import Figure, Findings, Table
from lmstudy.sections.attention import section

from .specs import spec_fields, spec_for

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
            spec = spec_for(
                "attention",
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
        spec_for("attention", implementation="flash", precision="fp32", head_dim=8, seq_lens=(16,))


def test_naive_compile_runs_and_records_its_first_call(smoke_run):
    # The smoke run's sweep compiled naive attention (a test of its own would compile it again).
    rows = pd.read_csv(smoke_run / "results/default/attention/attention.csv")
    compiled = rows[(rows["implementation"] == "naive-compile") & (rows["status"] == "ok")]
    assert len(compiled) >= 2
    # The first call traces and compiles: far slower than a steady call.
    assert (compiled["first_call_ms"] > compiled["forward_median_ms"] + compiled["backward_median_ms"]).all()


def test_section_from_real_rows(sweep_rows, tmp_path):
    write_csv(tmp_path / "attention" / "attention.csv", sweep_rows)
    figures = tmp_path / "figures"
    section.SECTION.draw(tmp_path, figures)
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


def _cpu_memory_peak(fn, trace_path: Path) -> int:
    """The highest CPU memory `fn` holds above what was allocated when it began, from the profiler's trace."""
    import json

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    prof.export_chrome_trace(str(trace_path))
    events = [e for e in json.loads(trace_path.read_text())["traceEvents"] if e.get("name") == "[memory]"]
    # Each event is one allocation (+bytes) or free (-bytes), autograd's thread's too: the running sum
    # in time order is what `fn` holds.
    events.sort(key=lambda e: e["ts"])
    return int(np.cumsum([e["args"]["Bytes"] for e in events]).max())


def test_accounting_of_the_peak_matches_what_a_cpu_allocates(tmp_path):
    """Forward and backward on a CPU: the peak is the accounting's less the CUDA-only grad x probs product."""
    batch, seq, d = 2, 256, 8
    q, k, v = _qkv(batch, seq, d, grad=True)
    grad_out = torch.randn_like(q)

    def forward_backward():
        attention.naive_attention(q, k, v).backward(grad_out)

    forward_backward()  # autograd's first-call allocations, outside the measured one
    q.grad = k.grad = v.grad = None
    measured = _cpu_memory_peak(forward_backward, tmp_path / "trace.json")
    table = attention.naive_memory_accounting(batch, seq, d, "fp32")
    already_held = sum(r["bytes"] for r in table if r["tensor"].startswith(("q, k, v", "upstream")))
    cuda_only = next(r["bytes"] for r in table if "(CUDA)" in r["tensor"])
    predicted = attention.predicted_bytes(batch, seq, d, "fp32")["peak"]
    assert measured == pytest.approx(predicted - already_held - cuda_only, rel=1e-3)


# The H200 full run's attention memory, from the review of its report (reviews/full-report-h200.md,
# D2 and D9), fp32, batch 8: measured peak 33,472 MiB at d=128 seq 16,384 and 2,140 MiB at d=16 seq
# 4,096; measured in use before the backward = predicted + 64 MiB in all 20 naive configurations.
H200_PEAK_MIB = {(128, 16384): 33472, (16, 4096): 2140}
CUBLAS_WORKSPACE = 64 * 2**20


@pytest.mark.parametrize(("d", "seq"), list(H200_PEAK_MIB))
def test_predicted_peak_is_the_h200_measurement_less_the_cublas_workspace(d, seq):
    predicted = attention.predicted_bytes(8, seq, d, "fp32")["peak"]
    assert predicted + CUBLAS_WORKSPACE == H200_PEAK_MIB[(d, seq)] * 2**20


def test_fit_recovers_a_known_constant_and_exponent():
    seq = np.array([256, 1024, 4096, 8192, 16384])
    exact = 64 * 2**20 + 3.0 * seq**1.87
    fit = fit_constant_plus_power(seq, exact)
    assert fit["exponent"] == pytest.approx(1.87, abs=1e-3)
    assert fit["constant"] == pytest.approx(64 * 2**20, rel=1e-4)
    noisy = exact * (1 + 0.002 * np.random.default_rng(0).standard_normal(len(seq)))
    fit = fit_constant_plus_power(seq, noisy)
    assert fit["exponent"] == pytest.approx(1.87, abs=0.02)
    assert fit["constant"] == pytest.approx(64 * 2**20, rel=0.01)
    # Linear growth whose best line has a negative constant: the constant is held at 0 (memory has no
    # negative part), and the exponent takes up the difference.
    fit = fit_constant_plus_power(seq, 5.0 * seq - 100)
    assert fit["constant"] == 0 and fit["exponent"] == pytest.approx(1.0, abs=0.05)
    assert fit_constant_plus_power(seq[:2], exact[:2]) is None  # three unknowns need three lengths


def _h200_like_rows() -> pd.DataFrame:
    """Naive and SDPA rows shaped as the full run's: naive = the accounting + the 64 MiB workspace."""
    rows = []
    for d in (16, 128):
        for seq in (256, 1024, 4096, 8192, 16384):
            bsd = 8 * seq * d * 4
            predicted = attention.predicted_bytes(8, seq, d, "fp32")
            base = {"precision": "fp32", "batch_size": 8, "head_dim": d, "seq_len": seq, "status": "ok",
                    "steps": 100, "warmup": 10, "device_memory_bytes": 140 * 2**30,
                    "forward_median_ms": 1.0, "backward_median_ms": 2.0}
            rows.append({**base, "implementation": "naive",
                         "inputs_bytes": 4 * bsd + CUBLAS_WORKSPACE,
                         "memory_before_backward_bytes": predicted["before_backward"] + CUBLAS_WORKSPACE,
                         "peak_bytes": predicted["peak"] + CUBLAS_WORKSPACE,
                         "predicted_before_backward_bytes": predicted["before_backward"],
                         "predicted_peak_bytes": predicted["peak"]})
            # SDPA: q, k, v, grad_out, output and the log-sum-exp (batch x seq fp32); then 3 gradients.
            before = 5 * bsd + 8 * seq * 4
            rows.append({**base, "implementation": "sdpa", "sdpa_backend": "flash", "inputs_bytes": 4 * bsd,
                         "memory_before_backward_bytes": before, "peak_bytes": before + 3 * bsd})
    frame = pd.DataFrame(rows)
    frame["implementation"] = pd.Categorical(frame["implementation"], categories=section.IMPLEMENTATIONS)
    frame["total_ms"] = frame["forward_median_ms"] + frame["backward_median_ms"]
    return frame


def test_memory_findings_name_the_constant_and_find_the_quadratic_growth():
    frame = _h200_like_rows()
    fits = section.memory_fit_table(frame)
    naive = fits[fits["implementation"] == "naive eager"].set_index("d")
    # With the constant fitted beside it the exponent is the quadratic the course asks for ...
    assert naive.loc[16, "exponent of the growing part"] == pytest.approx(2.0, abs=0.05)
    assert naive.loc[128, "exponent of the growing part"] == pytest.approx(1.93, abs=0.07)
    sdpa = fits[fits["implementation"] == "SDPA"].set_index("d")
    assert sdpa.loc[128, "exponent of the growing part"] == pytest.approx(1.0, abs=0.01)
    assert section.cublas_workspace_bytes(frame) == CUBLAS_WORKSPACE
    said = section.findings(frame)
    text = " ".join(said)
    # ... where a single log-log ratio of the raw memory says 1.17 (the old finding's "1.16").
    assert "an exponent of" not in text
    assert any("constant 64.0 MiB: the cuBLAS workspace" in s for s in said), said
    assert any("naive eager (fp32, d=128)" in s and "seq^1.9" in s for s in said), said
    assert any(s.startswith("The accounting") and "within 0%, and its peak within 0%" in s for s in said)
    predicted = attention.predicted_bytes(8, 16384, 128, "fp32")["before_backward"]
    naive_mib = (predicted + CUBLAS_WORKSPACE) / 2**20
    sdpa_mib = (5 * 8 * 16384 * 128 * 4 + 8 * 16384 * 4) / 2**20
    remedy = next(s for s in said if s.startswith("What removes"))
    assert f"{sdpa_mib:.1f} MiB before the backward against naive's {naive_mib:.1f} MiB" in remedy
    assert f"{naive_mib / sdpa_mib:.0f}× less" in remedy


def test_oom_threshold_follows_the_accounting():
    seq = section.oom_threshold(8, 64, "fp32", 80 * 2**30)
    assert attention.predicted_bytes(8, seq, 64, "fp32")["peak"] > 80 * 2**30
    assert attention.predicted_bytes(8, seq // 2, 64, "fp32")["peak"] <= 80 * 2**30


def test_script_help_and_a_run(tmp_path):
    """By hand: `lmstudy measure attention` on a complete spec (the smoke preset's, with the sweep's own)."""
    command = [sys.executable, "-m", "lmstudy", "measure", "attention"]
    assert "--spec" in subprocess.run(
        [*command, "--help"], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    out = tmp_path / "a.csv"
    given = spec_fields("attention", implementation="sdpa", precision="fp32", head_dim=8, seq_lens=[16],
                        batch_size=2, steps=2, warmup=0)

    def run(**spec):
        return subprocess.run(
            [*command, "--out", out, "--spec", json.dumps(spec)], capture_output=True, text=True, cwd=REPO,
        )

    done = run(**given)
    assert done.returncode == 0, done.stderr[-3000:]
    assert pd.read_csv(out)["status"].tolist() == ["ok"]
    bad = run(**{**given, "steps": 1})
    assert bad.returncode == 2 and bad.stderr.startswith("error: the spec's steps")
