"""Section 5, attention alone: tables, figures, memory accounting and findings.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.sections.attention.tables import (
    GIB,
    LABELS,
    MIB,
    _config,
    compile_table,
    cublas_workspace_bytes,
    memory_fit_table,
    oom_threshold,
    ratio_frame,
)
from lmstudy.report.sections.labels import faster


def findings(frame: pd.DataFrame) -> list[str]:
    items = []
    ok = frame[frame["status"] == "ok"]
    oom = frame[frame["status"] == "OOM"]
    if len(oom):
        for impl, part in oom.groupby("implementation", observed=True):
            first = part.sort_values(["seq_len", "head_dim"]).iloc[0]
            items.append(
                f"{LABELS[impl]} ran out of memory in {len(part)} of "
                f"{int((frame['implementation'] == impl).sum())} configurations, "
                f"the smallest at {_config(first)} ({first['precision']})."
            )
    else:
        items.append(f"No configuration ran out of memory ({len(frame)} measured).")
    sdpa = ok[ok["implementation"] == "sdpa"]
    for precision, part in sdpa.groupby("precision"):
        backends = ", ".join(sorted(set(part["sdpa_backend"].dropna().astype(str))))
        items.append(f"SDPA in {precision} dispatched to the {backends} backend.")
    for slow, fast, what in (("naive", "sdpa", "SDPA"), ("naive", "naive-compile", "torch.compile")):
        ratios = ratio_frame(frame, slow, fast)
        if ratios.empty:
            continue
        for precision, part in ratios.groupby("precision"):
            top = part.loc[part["total"].idxmax()]
            longest = part[part["seq_len"] == part["seq_len"].max()]
            items.append(
                f"With {what} ({precision}) forward+backward is {faster(part['total'].median())} than "
                f"naive eager attention (median; at best {faster(top['total'])}, {_config(top)}); "
                f"at the longest sequence both ran ({int(longest['seq_len'].iloc[0])}) it is "
                f"{faster(longest['total'].median())} (forward {faster(longest['forward'].median())}, "
                f"backward {faster(longest['backward'].median())})."
            )
    items += memory_findings(frame)
    compiled = compile_table(frame)
    if not compiled.empty and compiled["compile s"].notna().any():
        items.append(
            f"Compiling naive attention costs {compiled['compile s'].median():.1f} s per shape "
            f"(median; {compiled['compile s'].min():.1f} to {compiled['compile s'].max():.1f} s), "
            "paid on the first call."
        )
    return items


def _named_constant(frame: pd.DataFrame, fits: pd.DataFrame) -> tuple[float, str]:
    """The constant under naive attention's memory, in bytes, and what it is and how it was found."""
    workspace = cublas_workspace_bytes(frame)
    if workspace == workspace:
        return workspace, "the cuBLAS workspace, measured as what naive's inputs hold beyond SDPA's"
    naive = fits[fits["implementation"] == LABELS["naive"]]
    if len(naive):
        constant = float(naive.loc[naive["d"].idxmax(), "constant MiB"]) * MIB
        return constant, "the constant of the fit below (cuBLAS's workspace and the allocator's rounding)"
    return 0.0, ""


def memory_findings(frame: pd.DataFrame) -> list[str]:
    """How attention's memory grows (a constant plus a power of seq), the accounting, and what removes N^2."""
    items = []
    ok = frame[frame["status"] == "ok"].dropna(subset=["memory_before_backward_bytes"])
    if ok.empty:
        return items
    fits = memory_fit_table(frame)
    constant, source = _named_constant(frame, fits)
    if source.startswith("the cuBLAS"):
        items.append(
            f"Naive attention's memory carries a constant {constant / MIB:.1f} MiB: {source} (median over "
            "the configurations both ran), allocated once by the first matmul. SDPA's fused kernel calls "
            "no cuBLAS."
        )
    for _, fit in fits.iterrows():
        if fit["implementation"] == LABELS["naive-compile"] or fit["d"] != fits["d"].max():
            continue
        items.append(
            f"{fit['implementation']} ({fit['precision']}, d={fit['d']}): the memory in use before the "
            f"backward is a constant {fit['constant MiB']:.1f} MiB plus a part that grows as "
            f"seq^{fit['exponent of the growing part']:.2f} (fitted over seq {fit['seq from']} to "
            f"{fit['seq to']}, largest misfit {fit['largest misfit %']:.1f}%)."
        )
    naive = ok[ok["implementation"] == "naive"]
    if len(naive):
        from lmstudy.report.answers import percent

        growing = naive["memory_before_backward_bytes"] - constant
        before = growing / naive["predicted_before_backward_bytes"] - 1
        what = "cuBLAS workspace" if source.startswith("the cuBLAS") else "fitted constant"
        named = f" less the {constant / MIB:.1f} MiB {what}" if source else ""
        text = (
            f"The accounting from shapes and dtypes predicts naive attention's memory in use before the "
            f"backward{named} within {percent(before.abs().max())}"
        )
        if {"peak_bytes", "predicted_peak_bytes"} <= set(naive.columns):
            peak = (naive["peak_bytes"] - constant) / naive["predicted_peak_bytes"] - 1
            text += (
                f", and its peak within {percent(peak.abs().max())} (every seq x seq tensor alive at "
                "the peak counted)"
            )
        items.append(text + f", in all {len(naive)} configurations that ran.")
    items += _what_removes_n_squared(ok)
    memory = ok["device_memory_bytes"].dropna() if "device_memory_bytes" in ok else pd.Series(dtype=float)
    if len(naive) and len(memory):
        d = int(naive["head_dim"].max())
        batch = int(naive["batch_size"].iloc[0])
        for precision in sorted(naive["precision"].unique()):
            seq = oom_threshold(batch, d, precision, memory.iloc[0], constant)
            items.append(
                f"By that accounting (and the constant) naive {precision} attention at batch {batch}, d={d} "
                f"outgrows the {memory.iloc[0] / GIB:.0f} GiB available from sequence length {seq} "
                "(power of two) on."
            )
    return items


def _what_removes_n_squared(ok: pd.DataFrame) -> list[str]:
    """SDPA's memory against naive's at the longest sequence both ran (largest d): the remedy, measured."""
    items = []
    both = ok[ok["implementation"].isin(["naive", "sdpa"])]
    values = [c for c in ("memory_before_backward_bytes", "peak_bytes") if c in both]
    wide = both.pivot_table(
        index=["precision", "head_dim", "seq_len"], columns="implementation", observed=True, aggfunc="first",
        values=values,
    ).dropna()
    if wide.empty or ("memory_before_backward_bytes", "sdpa") not in wide:
        return items
    for precision, part in wide.groupby(level="precision"):
        d = part.index.get_level_values("head_dim").max()
        part = part.xs(d, level="head_dim", drop_level=False)
        seq = part.index.get_level_values("seq_len").max()
        row = part.xs(seq, level="seq_len").iloc[0]
        naive = row[("memory_before_backward_bytes", "naive")]
        sdpa = row[("memory_before_backward_bytes", "sdpa")]
        text = (
            "What removes the seq x seq memory: SDPA's fused kernel never stores the scores or the softmax "
            f"output (it recomputes them in the backward). At seq {int(seq)}, d={int(d)} ({precision}) "
            "it holds "
            f"{sdpa / MIB:.1f} MiB before the backward against naive's {naive / MIB:.1f} MiB, "
            f"{naive / sdpa:.0f}× less"
        )
        if ("peak_bytes", "sdpa") in row and row[("peak_bytes", "sdpa")] > 0:
            text += (
                f"; its peak is {row[('peak_bytes', 'sdpa')] / MIB:.1f} MiB against "
                f"{row[('peak_bytes', 'naive')] / MIB:.1f} MiB, "
                f"{row[('peak_bytes', 'naive')] / row[('peak_bytes', 'sdpa')]:.0f}× less"
            )
        items.append(text + ".")
    return items
