"""Section 2, kernel profiles: its answers to the course's questions (a) to (e)."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.nsys import tables as T
from lmstudy.analyse.nsys.names import kernel_alias
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


def _config(row) -> str:
    return f"{row['size']} ctx {int(row['context_length'])}"


def _largest(frame: pd.DataFrame) -> pd.Series:
    """The last row in size order at the longest context: the configuration that says most."""
    ordered = in_size_order(frame)
    return ordered[ordered["context_length"] == ordered["context_length"].max()].iloc[-1]


def time_answer(data: dict[str, pd.DataFrame], said: dict) -> Answer:
    table = T.forward_time_table(data["ranges"], data["runs"], data["timing"])
    rows = table[(table["pass"] == "forward") & (table["status"] == "ok")].dropna(subset=["nsys forward ms"])
    if rows.empty:
        return Answer(Q["a"], "Not answered: no forward pass was profiled without running out of memory.")
    row = _largest(rows)
    text = (
        f"For {_config(row)}, {said['short']} puts one forward pass at {row['nsys forward ms']:.3g} "
        "ms from its "
        f"first {said['kernel']} starting to its last ending ({row['nsys forward kernels ms']:.3g} ms "
        "of them "
        f"busy)"
    )
    if pd.notna(row.get("timer step ms")):
        text += f", against {row['timer step ms']:.3g} ms by the timing section's timer"
    if pd.notna(row.get("capture timer ms")):
        text += f" and {row['capture timer ms']:.3g} ms by the timer inside the capture"
    ratio = rows["nsys step / timer"].dropna()
    text += "."
    if len(ratio) > 1:
        text += f" Over {count(len(ratio), 'configuration')} the ratio is {span(ratio.min(), ratio.max())}×."
    return Answer(Q["a"], text, "nsys_step_time")


def _top(part: pd.DataFrame) -> pd.Series:
    return part.groupby("kernel")["total_ns"].sum().sort_values(ascending=False)


def top_kernel_answer(kernels: pd.DataFrame, said: dict) -> Answer:
    """(b): the forward's top kernel and its calls per pass; whether forward+backward's top is the same."""
    forward = kernels[(kernels["pass"] == "forward") & (kernels["phase"] == "forward")]
    train = kernels[(kernels["pass"] == "train_step") & kernels["phase"].isin(["forward", "backward"])]
    if forward.empty:
        return Answer(Q["b"], "Not answered: no forward pass was profiled.")
    name = kernel_alias
    configs = in_size_order(forward[T.CONFIG].drop_duplicates())
    row = configs[configs["context_length"] == configs["context_length"].max()].iloc[-1]
    here = forward[(forward["size"] == row["size"]) & (forward["context_length"] == row["context_length"])]
    totals = _top(here)
    top = totals.index[0]
    steps = here["profiled_steps"].iloc[0]
    calls = here[here["kernel"] == top]["instances"].sum() / steps
    text = (
        f"For {_config(row)} the top forward {said['kernel']} is {name(top)} "
        f"({100 * totals.iloc[0] / totals.sum():.0f}% of forward {said['time']}, called {calls:.0f} "
        "times per "
        "forward pass)."
    )
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
    if same or differ:
        total = same + len(differ)
        if not differ:
            text += (
                f" Yes: over forward+backward of a training step the top {said['kernel']} is the same one in "
                f"{'all ' if total > 1 else ''}{count(total, 'configuration')}."
            )
        else:
            size, context, other = differ[-1]
            category = train.loc[train["kernel"] == other, "category"].iloc[0]
            text += (
                f" {'No' if not same else 'Not always'}: over forward+backward of a training step it "
                "is the same "
                f"in {same} of {count(total, 'configuration')}; in the others a different "
                f"{said['kernel']} leads "
                f"(for {size} ctx {context}: {name(other)}, "
                + (
                    "another GEMM: the backward multiplies by transposed matrices"
                    if category == "GEMM"
                    else category
                )
                + ")."
            )
    return Answer(Q["b"], text, "nsys_top_kernels")


def non_gemm_answer(kernels: pd.DataFrame, said: dict) -> Answer:
    table = T.top_non_gemm_forward(kernels)
    if table.empty:
        return Answer(Q["c"], "Not answered: no forward pass was profiled.")
    row = _largest(table)
    part = table[(table["size"] == row["size"]) & (table["context_length"] == row["context_length"])]
    listed = "; ".join(
        f"{kernel_alias(k['kernel'])} ({k['category']}, {k['share of forward %']:.1f}%)"
        for _, k in part.iterrows()
    )
    return Answer(
        Q["c"],
        f"For {_config(row)}, beside the matrix products: {listed} of forward {said['time']}.",
        "nsys_top_non_gemm_forward",
    )


def gemm_answer(kernels: pd.DataFrame, said: dict) -> Answer:
    shares = T.category_shares(kernels)
    d = T.gemm_share(kernels)
    if not {"inference GEMM %", "training GEMM %"} <= set(d.columns):
        return Answer(Q["d"], "Not answered: inference and a training step were not both profiled.")
    both = d.dropna(subset=["inference GEMM %", "training GEMM %"])
    if both.empty:
        return Answer(Q["d"], "Not answered: no configuration has both passes profiled.")
    train = shares[shares["pass"] == "train_step"]
    rest = [c for c in train.columns if c not in (*T.CONFIG, "GEMM")]
    second = train[rest].mean().sort_values(ascending=False) if rest else pd.Series(dtype=float)
    text = (
        "Matrix products take "
        f"{span(both['inference GEMM %'].min(), both['inference GEMM %'].max(), '.1f')}% "
        f"of {said['time']} in inference and "
        f"{span(both['training GEMM %'].min(), both['training GEMM %'].max(), '.1f')}% in a training step "
        f"(over {count(len(both), 'configuration')})"
    )
    if len(second):
        # "next" only where GEMM leads; else the categories that outweigh it are named as such.
        gemm = float(train["GEMM"].mean()) if "GEMM" in train else 0.0
        larger = second[second > gemm]
        shown = larger if len(larger) else second.head(2)
        listed = " and ".join(f"{name} ({share:.1f}%)" for name, share in shown.head(2).items())
        text += (f"; in the training step {listed} {'take' if len(shown.head(2)) > 1 else 'takes'} more "
                 "than matrix products do" if len(larger) else
                 f"; in the training step the next categories are {listed}")
    inference, training = both["inference GEMM %"], both["training GEMM %"]
    headline = (
        f"Matrix products take {span(inference.min(), inference.max(), '.0f')}% of {said['time']} in "
        "inference and "
        f"{span(training.min(), training.max(), '.0f')}% in a training step."
    )
    trust = (f"{said['time']} from the profiler, " + ("one configuration" if len(both) == 1
             else f"range over {count(len(both), 'configuration')}"))
    return Answer(Q["d"], text + ".", "nsys_gemm_share", headline=headline, trust=trust)


def attention_answer(kernels: pd.DataFrame) -> Answer:
    e = T.attention_table(kernels)
    if lacks(kernels, "range"):
        return Answer(Q["e"], "Not answered: this run recorded no range of its kernels, so attention's are "
                      "not told apart.")
    if e.empty or e["time softmax/matmul"].isna().all():
        return Answer(Q["e"], "Not answered: no attention ranges were profiled.")
    row = _largest(e.dropna(subset=["time softmax/matmul"]))
    text = (
        f"For {_config(row)}, softmax takes {row['softmax ms']:.3g} ms per step against "
        f"{row['matmul ms']:.3g} ms "
        f"for the two attention matmuls ({row['time softmax/matmul']:.2f}×)"
    )
    if pd.isna(row["FLOPs softmax/matmul"]):
        shape = [column_label(c) for c in ("batch_size", "d_model", "num_heads") if lacks(kernels, c)]
        text += (f"; their FLOPs are not known, as this run recorded no {', '.join(shape)}."
                 if shape else "; their FLOPs are not known.")
    else:
        text += (
            f" while doing {row['FLOPs softmax/matmul']:.3f}× their FLOPs: per FLOP it is "
            f"{row['time ratio / FLOP ratio']:.0f}× "
            "slower"
            + (
                ": it reads and writes the whole score matrix for few operations (memory-bound)."
                if row["time ratio / FLOP ratio"] > 2 and not on_cpu(kernels)
                else "."  # on a CPU, so small an operator's time is mostly the operator's own overhead
            )
        )
    if pd.notna(row.get("non-matmul/matmul time")):
        copies = row.get("copies in the matmul ranges ms")
        copied = (f" and the memory copies in the two matmuls' ranges ({copies:.3g} ms: {row['copies']})"
                  if pd.notna(copies) and copies > 0 else "")
        text += (
            f" Counting the scaling and the mask ({row['scale and mask ms']:.3g} ms){copied} with it, "
            f"attention's non-matmul work takes {row['non-matmul/matmul time']:.2f}× the matmuls' time."
        )
    return Answer(Q["e"], text, "nsys_attention")


def answers(data: dict[str, pd.DataFrame]) -> list[Answer]:
    runs, kernels = data["runs"], data["kernels"]
    if runs.empty:
        return []
    said = words(runs)
    items = [time_answer(data, said)]
    if kernels.empty:
        missing = "Not answered: every profiled configuration ran out of memory, so no kernel was captured."
        return items + [Answer(Q[k], missing) for k in "bcde"]
    items += [
        top_kernel_answer(kernels, said),
        non_gemm_answer(kernels, said),
        gemm_answer(kernels, said),
        attention_answer(kernels),
    ]
    if said["kernel"] == "operator":
        note = " (On a CPU, operators stand in for kernels and their time is CPU time.)"
        for item in items:
            item.text += note if not item.text.startswith("Not answered") else ""
    return items
