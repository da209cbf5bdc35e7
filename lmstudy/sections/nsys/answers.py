"""Section 2, kernel profiles: its answers to the course's questions (a) to (e)."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.nsys import tables as T
from lmstudy.analyse.nsys.names import kernel_alias
from lmstudy.report import contract
from lmstudy.report.answers import Answer, count, span
from lmstudy.report.coverage import lacks
from lmstudy.report.labels import column_label, in_size_order, on_cpu
from lmstudy.sections.nsys.tables import words

Q = {
    "a": "nsys_profile (a): how long does a forward pass take under the profiler, against the Python timer?",
    "b": "nsys_profile (b): which kernel takes the most time in the forward pass, how often is it "
    "called, and is "
    "it the same "
    "over forward and backward?",
    "c": "nsys_profile (c): which non-matrix-multiply kernels take the most forward time?",
    "d": "nsys_profile (d): what share of the time is matrix multiplication, in inference and in a "
    "training step?",
    "e": "nsys_profile (e): inside attention: softmax (and scaling, masking) time against the "
    "matmuls', against "
    "their FLOPs?",
}


_say = contract.wording(__name__)


def _unanswered(question: str, why: str) -> Answer:
    return Answer(Q[question], _say("not_answered", why=why))


def _config(row) -> dict:
    return {"size": row["size"], "context": int(row["context_length"])}


def _number(value) -> float | None:
    return value if pd.notna(value) else None


def _largest(frame: pd.DataFrame) -> pd.Series:
    """The last row in size order at the longest context: the configuration that says most."""
    ordered = in_size_order(frame)
    return ordered[ordered["context_length"] == ordered["context_length"].max()].iloc[-1]


def time_answer(data: dict[str, pd.DataFrame], said: dict) -> Answer:
    table = T.forward_time_table(data["ranges"], data["runs"], data["timing"])
    rows = table[(table["pass"] == "forward") & (table["status"] == "ok")].dropna(subset=["nsys forward ms"])
    if rows.empty:
        return _unanswered("a", "forward_oom")
    row = _largest(rows)
    ratio = rows["nsys step / timer"].dropna()
    text = _say("step_time", c=_config(row), short=said["short"], kernel=said["kernel"],
                nsys_ms=row["nsys forward ms"], busy_ms=row["nsys forward kernels ms"],
                timer_ms=_number(row.get("timer step ms")), capture_ms=_number(row.get("capture timer ms")),
                configurations=count(len(ratio), "configuration"),
                ratio_span=span(ratio.min(), ratio.max()) if len(ratio) > 1 else None)
    return Answer(Q["a"], text, "nsys_step_time")


def _top(part: pd.DataFrame) -> pd.Series:
    return part.groupby("kernel")["total_ns"].sum().sort_values(ascending=False)


def top_kernel_answer(kernels: pd.DataFrame, said: dict) -> Answer:
    """(b): the forward's top kernel and its calls per pass; whether forward+backward's top is the same."""
    forward = kernels[(kernels["pass"] == "forward") & (kernels["phase"] == "forward")]
    if forward.empty:
        return _unanswered("b", "no_forward")
    configs = in_size_order(forward[T.CONFIG].drop_duplicates())
    row = configs[configs["context_length"] == configs["context_length"].max()].iloc[-1]
    here = forward[(forward["size"] == row["size"]) & (forward["context_length"] == row["context_length"])]
    totals = _top(here)
    top = totals.index[0]
    calls = here[here["kernel"] == top]["instances"].sum() / here["profiled_steps"].iloc[0]
    text = _say("top_kernel", c=_config(row), kernel=said["kernel"], time=said["time"], top=kernel_alias(top),
                share=100 * totals.iloc[0] / totals.sum(), calls=calls, train=_training_top(kernels, forward))
    return Answer(Q["b"], text, "nsys_top_kernels")


def _training_top(kernels: pd.DataFrame, forward: pd.DataFrame) -> dict | None:
    """In how many configurations forward+backward of a training step has the forward's top kernel on
    top too, and the last one whose top differs; None where no configuration has both."""
    train = kernels[(kernels["pass"] == "train_step") & kernels["phase"].isin(["forward", "backward"])]
    same, differ = 0, []
    for (size, context), part in train.groupby(["size", "context_length"], sort=False):
        fwd = forward[(forward["size"] == size) & (forward["context_length"] == context)]
        if fwd.empty or part.empty:
            continue
        both_top = _top(part).index[0]
        if both_top == _top(fwd).index[0]:
            same += 1
        else:
            differ.append((size, context, both_top))
    if not (same or differ):
        return None
    total = same + len(differ)
    told = {"same": same, "total": total, "configurations": count(total, "configuration"), "other": None}
    if differ:
        size, context, other = differ[-1]
        category = train.loc[train["kernel"] == other, "category"].iloc[0]
        told.update(size=size, context=context, other=kernel_alias(other), category=category)
    return told


def non_gemm_answer(kernels: pd.DataFrame, said: dict) -> Answer:
    table = T.top_non_gemm_forward(kernels)
    if table.empty:
        return _unanswered("c", "no_forward")
    row = _largest(table)
    part = table[(table["size"] == row["size"]) & (table["context_length"] == row["context_length"])]
    listed = [(kernel_alias(k["kernel"]), k["category"], k["share of forward %"]) for _, k in part.iterrows()]
    return Answer(Q["c"], _say("non_gemm", c=_config(row), listed=listed, time=said["time"]),
                  "nsys_top_non_gemm_forward")


def gemm_answer(kernels: pd.DataFrame, said: dict) -> Answer:
    shares = T.category_shares(kernels)
    d = T.gemm_share(kernels)
    if not {"inference GEMM %", "training GEMM %"} <= set(d.columns):
        return _unanswered("d", "passes")
    both = d.dropna(subset=["inference GEMM %", "training GEMM %"])
    if both.empty:
        return _unanswered("d", "no_pair")
    train = shares[shares["pass"] == "train_step"]
    rest = [c for c in train.columns if c not in (*T.CONFIG, "GEMM")]
    second = train[rest].mean().sort_values(ascending=False) if rest else pd.Series(dtype=float)
    # "next" only where GEMM leads; else the categories that outweigh it are named as such.
    gemm = float(train["GEMM"].mean()) if "GEMM" in train else 0.0
    larger = second[second > gemm]
    shown = list((larger if len(larger) else second.head(2)).head(2).items())
    inference, training = both["inference GEMM %"], both["training GEMM %"]
    configurations = count(len(both), "configuration")
    text = _say("gemm", time=said["time"], inference=span(inference.min(), inference.max(), ".1f"),
                training=span(training.min(), training.max(), ".1f"), configurations=configurations,
                shown=shown, larger=bool(len(larger)))
    headline = _say("gemm_headline", time=said["time"], training=span(training.min(), training.max(), ".0f"),
                    inference=span(inference.min(), inference.max(), ".0f"))
    trust = _say("gemm_trust", time=said["time"], configurations=configurations, many=len(both) > 1)
    return Answer(Q["d"], text, "nsys_gemm_share", headline=headline, trust=trust)


def attention_answer(kernels: pd.DataFrame) -> Answer:
    e = T.attention_table(kernels)
    if lacks(kernels, "range"):
        return _unanswered("e", "no_range")
    if e.empty or e["time softmax/matmul"].isna().all():
        return _unanswered("e", "no_attention")
    row = _largest(e.dropna(subset=["time softmax/matmul"]))
    flops = None if pd.isna(row["FLOPs softmax/matmul"]) else {
        "ratio": row["FLOPs softmax/matmul"], "slower": row["time ratio / FLOP ratio"]}
    rest = None
    if pd.notna(row.get("non-matmul/matmul time")):
        copies = row.get("copies in the matmul ranges ms")
        rest = {"scale_ms": row["scale and mask ms"], "ratio": row["non-matmul/matmul time"],
                "copies_ms": copies if pd.notna(copies) and copies > 0 else None, "copies": row.get("copies")}
    text = _say(
        "attention", c=_config(row), softmax_ms=row["softmax ms"], matmul_ms=row["matmul ms"],
        ratio=row["time softmax/matmul"], flops=flops,
        unrecorded=[column_label(c) for c in ("batch_size", "d_model", "num_heads") if lacks(kernels, c)],
        # on a CPU, so small an operator's time is mostly the operator's own overhead
        memory_bound=flops is not None and flops["slower"] > 2 and not on_cpu(kernels), rest=rest)
    return Answer(Q["e"], text, "nsys_attention")


def answers(data: dict[str, pd.DataFrame]) -> list[Answer]:
    runs, kernels = data["runs"], data["kernels"]
    if runs.empty:
        return []
    said = words(runs)
    items = [time_answer(data, said)]
    if kernels.empty:
        return items + [_unanswered(k, "no_kernels") for k in "bcde"]
    items += [
        top_kernel_answer(kernels, said),
        non_gemm_answer(kernels, said),
        gemm_answer(kernels, said),
        attention_answer(kernels),
    ]
    if said["kernel"] == "operator":
        note = " " + _say("cpu_note")
        for item in items:
            item.text += note if not item.text.startswith("Not answered") else ""
    return items
