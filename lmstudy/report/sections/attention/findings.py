"""Section 5, attention alone: tables, figures, memory accounting and findings.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import math

import pandas as pd

from lmstudy.report.sections.attention.tables import (
    GIB,
    LABELS,
    _config,
    compile_table,
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
    for impl in ("naive", "sdpa"):
        part = ok[(ok["implementation"] == impl)].dropna(subset=["memory_before_backward_bytes"])
        for (precision, d), line in part.groupby(["precision", "head_dim"]):
            line = line.sort_values("seq_len")
            if len(line) < 2 or d != part["head_dim"].max():
                continue
            lo, hi = line.iloc[0], line.iloc[-1]
            growth = hi["memory_before_backward_bytes"] / lo["memory_before_backward_bytes"]
            steps = hi["seq_len"] / lo["seq_len"]
            items.append(
                f"{LABELS[impl]} ({precision}, d={int(d)}): from seq {int(lo['seq_len'])} to "
                f"{int(hi['seq_len'])} ({steps:.0f}× longer) the memory in use before the backward "
                f"grows {growth:.0f}× (to {hi['memory_before_backward_bytes'] / GIB:.2f} GiB): "
                f"an exponent of {math.log(growth) / math.log(steps):.2f} in the sequence length."
            )
    naive = ok[ok["implementation"] == "naive"].dropna(subset=["memory_before_backward_bytes"])
    if len(naive):
        error = naive["memory_before_backward_bytes"] / naive["predicted_before_backward_bytes"] - 1
        items.append(
            f"The accounting from shapes and dtypes predicts the memory in use before the backward of "
            f"naive attention within {error.abs().max() * 100:.1f}% in all {len(naive)} configurations "
            f"that ran (median deviation {error.median() * 100:+.1f}%)."
        )
        memory = naive["device_memory_bytes"].dropna()
        if len(memory):
            d = int(naive["head_dim"].max())
            for precision in sorted(naive["precision"].unique()):
                seq = oom_threshold(int(naive["batch_size"].iloc[0]), d, precision, memory.iloc[0])
                items.append(
                    f"By that accounting naive {precision} attention at batch "
                    f"{int(naive['batch_size'].iloc[0])}, d={d} outgrows the "
                    f"{memory.iloc[0] / GIB:.0f} GiB available from sequence length {seq} "
                    f"(power of two) on."
                )
    compiled = compile_table(frame)
    if not compiled.empty and compiled["compile s"].notna().any():
        items.append(
            f"Compiling naive attention costs {compiled['compile s'].median():.1f} s per shape "
            f"(median; {compiled['compile s'].min():.1f} to {compiled['compile s'].max():.1f} s), "
            "paid on the first call."
        )
    return items
