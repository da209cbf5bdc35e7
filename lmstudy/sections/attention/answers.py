"""Section 5, attention alone, and section 6's part (a): the answers to the course's questions on
attention's time and memory, the backend SDPA ran, and compiled against eager attention.

What removes the N² memory (and how memory scales) is the memory accounting's answer, in
findings.py beside it.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import Answer, count, of_all, span
from lmstudy.report.contract import wording
from lmstudy.sections.attention.tables import MIB, ratio_frame

Q = {
    "grid": "pytorch_attention: time and memory of attention over head size and sequence length; "
    "where does it run out "
    "of memory?",
    "backend": "pytorch_attention: which kernel did PyTorch's SDPA run?",
    "compile": "torch_compile (a): how much faster is compiled attention than eager?",
}


_say = wording(__name__)


def _point(row: pd.Series) -> dict:
    """A configuration as the answers name it: its head size, sequence length and forward+backward ms."""
    return {"d": int(row["head_dim"]), "seq": int(row["seq_len"]), "ms": row["total_ms"]}


def grid_answer(frame: pd.DataFrame) -> Answer:
    naive = frame[frame["implementation"] == "naive"]
    ok = naive[naive["status"] == "ok"]
    if ok.empty:
        return Answer(Q["grid"], _say("no_grid"))
    precision = "fp32" if (ok["precision"] == "fp32").any() else ok["precision"].iloc[0]
    ok = ok[ok["precision"] == precision].sort_values(["seq_len", "head_dim"])
    small, big = ok.iloc[0], ok.iloc[-1]
    memory = big.get("memory_before_backward_bytes")
    memory_mib = memory / MIB if pd.notna(memory) else None
    oom = naive[(naive["status"] == "OOM") & (naive["precision"] == precision)]
    first_oom = _point(oom.sort_values(["seq_len", "head_dim"]).iloc[0]) if len(oom) else None
    growth, fused = _memory_growth(frame, precision, small, big)
    text = _say("grid", precision=precision, small=_point(small), big=_point(big), memory_mib=memory_mib,
                oom=first_oom, max_seq=int(naive["seq_len"].max()), growth=growth, fused=fused)
    headline = _say("grid_headline", precision=precision, big=_point(big), memory_mib=memory_mib)
    many = pd.notna(big.get("processes")) and big.get("processes", 1) > 1
    trust = _say("trust", processes=int(big["processes"]) if many else None,
                 steps=int(big["steps"]) if "steps" in big else None)
    return Answer(Q["grid"], text, "attention_time_memory", headline=headline, trust=trust)


def _memory_growth(frame: pd.DataFrame, precision: str, small: pd.Series, big: pd.Series
                   ) -> tuple[dict | None, dict | None]:
    """How naive's memory before the backward grows from the shortest to the longest sequence against
    seq², and SDPA's memory at the longest (what removes the seq x seq part); None where unmeasured."""
    memory, first = big.get("memory_before_backward_bytes"), small.get("memory_before_backward_bytes")
    if not (pd.notna(memory) and pd.notna(first) and first > 0 and big["seq_len"] > small["seq_len"]):
        return None, None
    longer = big["seq_len"] / small["seq_len"]
    growth = {"longer": longer, "grows": memory / first, "squared": longer**2}
    sdpa = frame[
        (frame["implementation"] == "sdpa")
        & (frame["status"] == "ok")
        & (frame["precision"] == precision)
        & (frame["seq_len"] == big["seq_len"])
        & (frame["head_dim"] == big["head_dim"])
    ]
    if not (len(sdpa) and pd.notna(sdpa["memory_before_backward_bytes"].iloc[0])):
        return growth, None
    held = sdpa["memory_before_backward_bytes"].iloc[0]
    return growth, {"mib": held / MIB, "less": memory / held}


def backend_answer(frame: pd.DataFrame) -> Answer | None:
    rows = frame[(frame["implementation"] == "sdpa") & (frame["status"] == "ok")]
    if rows.empty or rows["sdpa_backend"].isna().all():
        return None
    by_precision = []
    for precision, part in rows.groupby("precision", sort=False):
        counts = part["sdpa_backend"].fillna("unknown").value_counts()
        by_precision.append(
            (precision, [(b, of_all(n, len(part), "configuration")) for b, n in counts.items()])
        )
    return Answer(Q["backend"], _say("backend", by_precision=by_precision), "attention_sdpa_backend")


def compile_answer(frame: pd.DataFrame) -> Answer | None:
    ratios = ratio_frame(frame, "naive", "naive-compile")
    if ratios.empty:
        return None
    # Only configurations whose eager and compiled intervals do not overlap are ranked.
    told = ratios[ratios["total_apart"]] if "total_apart" in ratios else ratios
    if told.empty:
        return Answer(Q["compile"], _say(
            "compile_untold", configurations=count(len(ratios), "configuration"),
            span=span(ratios["total"].min(), ratios["total"].max()),
            interval_span=span(ratios["total_low"].min(), ratios["total_high"].max())), "attention_compile")
    longest = told[told["seq_len"] == told["seq_len"].max()]
    text = _say("compile", span=span(told["total"].min(), told["total"].max()),
                configurations=count(len(told), "configuration"), left=len(ratios) - len(told),
                of=len(ratios), longest_span=span(longest["total"].min(), longest["total"].max()),
                longest_seq=int(longest["seq_len"].iloc[0]))
    return Answer(Q["compile"], text, "attention_compile")


def answers(frame: pd.DataFrame) -> list[Answer]:
    if frame.empty:
        return []
    items = [grid_answer(frame)]
    for extra in (backend_answer(frame), compile_answer(frame)):
        if extra is not None:
            items.append(extra)
    return items
