"""Section 5, attention alone, and section 6's part (a): the answers to the course's questions on
attention's time and memory, the backend SDPA ran, and compiled against eager attention.

What removes the N² memory (and how memory scales) is the memory accounting's answer, in
findings.py beside it.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import Answer, count, of_all, span
from lmstudy.sections.attention.tables import MIB, ratio_frame

Q = {
    "grid": "pytorch_attention: time and memory of attention over head size and sequence length; "
    "where does it run out "
    "of memory?",
    "backend": "pytorch_attention: which kernel did PyTorch's SDPA run?",
    "compile": "torch_compile (a): how much faster is compiled attention than eager?",
}


def grid_answer(frame: pd.DataFrame) -> Answer:
    naive = frame[frame["implementation"] == "naive"]
    ok = naive[naive["status"] == "ok"]
    if ok.empty:
        return Answer(Q["grid"], "Not answered: naive attention ran no configuration.")
    precision = "fp32" if (ok["precision"] == "fp32").any() else ok["precision"].iloc[0]
    ok = ok[ok["precision"] == precision]
    big = ok.sort_values(["seq_len", "head_dim"]).iloc[-1]
    small = ok.sort_values(["seq_len", "head_dim"]).iloc[0]
    text = (
        f"Naive {precision} attention (forward+backward) takes {small['total_ms']:.3g} ms at "
        f"d={int(small['head_dim'])}, "
        f"seq {int(small['seq_len'])} and {big['total_ms']:.3g} ms at d={int(big['head_dim'])}, "
        f"seq {int(big['seq_len'])}"
    )
    memory = big.get("memory_before_backward_bytes")
    if pd.notna(memory):
        text += f", where {memory / MIB:,.0f} MiB are in use before the backward"
    oom = naive[(naive["status"] == "OOM") & (naive["precision"] == precision)]
    if len(oom):
        first = oom.sort_values(["seq_len", "head_dim"]).iloc[0]
        text += f". It runs out of memory from seq {int(first['seq_len'])} (d={int(first['head_dim'])})."
    else:
        text += f". No configuration ran out of memory up to seq {int(naive['seq_len'].max())}."
    # How the memory scales, and what removes the seq x seq part: SDPA at the same shape.
    first_mem = small.get("memory_before_backward_bytes")
    if pd.notna(memory) and pd.notna(first_mem) and first_mem > 0 and big["seq_len"] > small["seq_len"]:
        longer = big["seq_len"] / small["seq_len"]
        text += (
            f" From seq {int(small['seq_len'])} to {int(big['seq_len'])} ({longer:.0f}× longer) naive's "
            f"memory before the backward grows {memory / first_mem:.0f}× (seq² would be {longer**2:.0f}×; "
            "the inputs and a constant cuBLAS workspace grow less): it keeps seq × seq scores and softmax "
            "output."
        )
        sdpa = frame[
            (frame["implementation"] == "sdpa")
            & (frame["status"] == "ok")
            & (frame["precision"] == precision)
            & (frame["seq_len"] == big["seq_len"])
            & (frame["head_dim"] == big["head_dim"])
        ]
        if len(sdpa) and pd.notna(sdpa["memory_before_backward_bytes"].iloc[0]):
            fused = sdpa["memory_before_backward_bytes"].iloc[0]
            text += (
                f" What removes it: PyTorch's fused SDPA holds {fused / MIB:,.1f} MiB there, "
                f"{memory / fused:.0f}× less, as it never stores those matrices (a FlashAttention-style "
                "kernel "
                "recomputes them in the backward)."
            )
    headline = f"Naive {precision} attention at d={int(big['head_dim'])}, seq {int(big['seq_len'])}: " + (
        f"{big['total_ms']:.3g} ms forward+backward"
        + (f", {memory / MIB:,.0f} MiB before the backward" if pd.notna(memory) else "")
        + "."
    )
    return Answer(
        Q["grid"],
        text,
        "attention_time_memory",
        headline=headline,
        trust=(f"median over {int(big['processes'])} fresh processes of each one's {int(big['steps'])}-step "
               "median" if pd.notna(big.get("processes")) and big.get("processes", 1) > 1
               else f"median of {int(big['steps'])} steps" if "steps" in big else ""),
    )


def backend_answer(frame: pd.DataFrame) -> Answer | None:
    rows = frame[(frame["implementation"] == "sdpa") & (frame["status"] == "ok")]
    if rows.empty or rows["sdpa_backend"].isna().all():
        return None
    said = []
    for precision, part in rows.groupby("precision", sort=False):
        counts = part["sdpa_backend"].fillna("unknown").value_counts()
        said.append(
            f"{precision}: "
            + ", ".join(f"{b} in {of_all(n, len(part), 'configuration')}" for b, n in counts.items())
        )
    text = "The backend SDPA dispatched to, by precision: " + "; ".join(said) + "."
    return Answer(Q["backend"], text, "attention_sdpa_backend")


def compile_answer(frame: pd.DataFrame) -> Answer | None:
    ratios = ratio_frame(frame, "naive", "naive-compile")
    if ratios.empty:
        return None
    # Only configurations whose eager and compiled intervals do not overlap are ranked.
    told = ratios[ratios["total_apart"]] if "total_apart" in ratios else ratios
    left = len(ratios) - len(told)
    if told.empty:
        return Answer(Q["compile"], (
            f"Compiled and eager naive attention are not told apart in any of the "
            f"{count(len(ratios), 'configuration')} (forward+backward: their intervals overlap; "
            f"{span(ratios['total'].min(), ratios['total'].max())}× with intervals as wide as "
            f"{span(ratios['total_low'].min(), ratios['total_high'].max())}×)."), "attention_compile")
    longest = told[told["seq_len"] == told["seq_len"].max()]
    text = (
        "Compiled naive attention over eager (forward+backward): "
        f"{span(told['total'].min(), told['total'].max())}× "
        f"over {count(len(told), 'configuration')} told apart"
        + (f" ({left} of {len(ratios)} not: their intervals overlap)" if left else "")
        + f", {span(longest['total'].min(), longest['total'].max())}× at the "
        f"longest sequence told apart ({int(longest['seq_len'].iloc[0])})."
    )
    return Answer(Q["compile"], text, "attention_compile")


def answers(frame: pd.DataFrame) -> list[Answer]:
    if frame.empty:
        return []
    items = [grid_answer(frame)]
    for extra in (backend_answer(frame), compile_answer(frame)):
        if extra is not None:
            items.append(extra)
    return items
