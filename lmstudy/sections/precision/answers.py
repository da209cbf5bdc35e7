"""Section 3, mixed precision: its answers to the course's questions, and the table of the
normalisation experiment (lmstudy/measure/norm_precision.py) they read."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.tables import steady_rows
from lmstudy.report.answers import Answer, count, percent, span
from lmstudy.report.contract import wording
from lmstudy.report.coverage import column
from lmstudy.report.labels import PASS_LABELS, on_cpu
from lmstudy.sections.timing import answers as timing_answers

ALL = "(every operation)"  # as lmstudy.measure.norm_precision names them (no torch here)
AS_MODEL = "(fp32 inside, as the study model)"
# What that row computes, in words that claim no more: the experiment rounds the norm's input and
# output to the low precision, which the study model under autocast does not (its residual stream
# stays float32, as its dtype table shows).
AS_MODEL_SHOWN = "fp32 inside, input and output rounded (the study model's RMSNorm on a low-precision input)"


_say = wording(__name__)


def accumulation_answer(frame: pd.DataFrame) -> Answer:
    by = frame.set_index("method")

    def result(method: str) -> dict:
        return {"name": method, "result": by.loc[method, "result"], "abs_error": by.loc[method, "abs_error"]}

    worst = by["abs_error"].idxmax()
    best = by["abs_error"].idxmin()
    text = _say("accumulation", best=result(best), worst=result(worst),
                others=[result(m) for m in by.index if m not in (best, worst)])
    question = "mixed_precision_accumulation: fp32 vs fp16, and fp16 into an fp32 accumulator"
    return Answer(question, text, "precision_accumulation")


def dtypes_answer(frame: pd.DataFrame) -> Answer:
    """(a): the dtypes observed under each autocast, grouped by dtype."""
    observed = []
    for precision in ("fp16", "bf16"):
        part = frame[(frame["precision"] == precision) & (frame["tensor"] != "(all)")]
        if part.empty:
            gone = frame[frame["precision"] == precision]
            if len(gone):
                observed.append({"name": precision, "note": gone["note"].iloc[0]})
            continue
        # Every parameter (and gradient) in one word when they all share a dtype: the layers differ.
        shown = part["tensor"].where(~part["tensor"].str.startswith("parameter "), "parameters")
        shown = shown.where(~part["tensor"].str.startswith("gradient of "), "gradients")
        shown = shown.str.replace(r"^output of (\w+) \((\w+)\)$", r"\2 \1", regex=True)
        groups = part.assign(tensor=shown).groupby("dtype", sort=False)["tensor"].apply(
            lambda t: list(dict.fromkeys(t)))
        observed.append({"name": precision, "note": None, "groups": list(groups.items())})
    return Answer(
        "benchmarking_mixed_precision (a): which dtypes do the parameters, outputs, loss and gradients have "
        "under autocast?",
        _say("dtypes", observed=observed),
        "precision_autocast_dtypes",
    )


def _error(value: float, nonfinite: int, tokens: int) -> object:
    return f"overflow ({nonfinite} of {tokens} tokens)" if nonfinite else value


@computes_table
def low_precision_speedup_table(timing: pd.DataFrame) -> pd.DataFrame:
    """fp32 median over the fp16 and over the bf16 autocast median, per configuration (steady state);
    empty unless the run timed fp16 (bf16 alone has the timing section's table)."""
    rows = steady_rows(timing)
    rows = rows[rows["status"] == "ok"]
    if "fp16" not in set(rows["precision"]) or "fp32" not in set(rows["precision"]):
        return pd.DataFrame()
    wide = rows.pivot_table(
        index=["size", "context_length", "pass"],
        columns="precision",
        values="median_ms",
        aggfunc="first",
        observed=True,
    )
    table = pd.DataFrame(index=wide.index)
    for low in ("fp16", "bf16"):
        if low in wide:
            table[f"{low} speed-up ×"] = wide["fp32"] / wide[low]
    table = table.dropna(how="all").reset_index()
    table["pass"] = table["pass"].astype(str).map(PASS_LABELS)
    return table.rename(columns={"context_length": "context"})


@computes_table
def norm_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean relative error against fp32, per norm and what ran in low precision, one column per
    precision and activation scale."""
    rows = frame.copy()
    rows["cell"] = [
        _error(v, n, t)
        for v, n, t in zip(rows["error_mean"], rows["nonfinite_tokens"], rows["tokens"], strict=True)
    ]
    rows["column"] = rows["precision"] + " ×" + rows["scale"].map(lambda s: f"{s:g}") + " scale"
    # Each norm's operations in the order they run, as the experiment lists them.
    order = pd.MultiIndex.from_frame(rows[["norm", "low_precision_op"]].drop_duplicates())
    table = rows.pivot_table(
        index=["norm", "low_precision_op"], columns="column", values="cell", aggfunc="first", sort=False
    )
    table = table.reindex(order)
    table.columns.name = None
    table = table.reset_index().rename(columns={"low_precision_op": "in low precision"})
    table["in low precision"] = table["in low precision"].replace({AS_MODEL: AS_MODEL_SHOWN})
    return table


def _one_op(rows: pd.DataFrame) -> pd.Series:
    singles = rows[~rows["low_precision_op"].isin([ALL, AS_MODEL, "input"])]
    return singles.set_index("low_precision_op")["error_mean"]


# An output this far from fp32's is lost (overflow to inf, or to 0 through rsqrt(inf)), not rounded.
LOST = 0.5


def _lost(rows: pd.DataFrame) -> pd.Series:
    return (rows["nonfinite_tokens"] > 0) | (rows["error_mean"] > LOST)


NORM_QUESTION = (
    "benchmarking_mixed_precision (b): what in the normalisation layer is sensitive to low precision; "
    "does bf16 still need it in fp32?"
)


def norm_answer(frame: pd.DataFrame) -> Answer:
    """(b): which operation of RMSNorm and LayerNorm causes the low-precision error, measured."""
    if frame.empty:
        return Answer(NORM_QUESTION, _say("no_norms"))
    base = frame[frame["scale"] == frame["scale"].min()]
    text = _say("norm", **_norm_numbers(base))
    if frame["scale"].nunique() > 1:
        text += " " + _say("overflow", **_overflow(frame[frame["scale"] == frame["scale"].max()]))
    whole = base[base["low_precision_op"] == ALL].set_index(["norm", "precision"])["error_mean"]
    return Answer(
        NORM_QUESTION,
        text,
        "precision_norm_errors",
        headline=_say("norm_headline", whole=[(n, p, e) for (n, p), e in whole.items()]),
        trust=_say("norm_trust", tokens=int(base.iloc[0]["tokens"])),
    )


def _norm_numbers(base: pd.DataFrame) -> dict:
    """At the smallest scale: each norm's error wholly in low precision, the input's rounding alone, the
    worst single operation, and how far computing inside in fp32 changes the whole's error."""
    first = base.iloc[0]
    precisions = list(dict.fromkeys(base["precision"]))
    rows = {
        key: part.set_index("low_precision_op")["error_mean"]
        for key, part in base.groupby(["norm", "precision"])
    }
    norms = list(dict.fromkeys(base["norm"]))
    singles = base[~base["low_precision_op"].isin([ALL, AS_MODEL, "input"])]
    worst = singles.loc[singles.groupby("precision")["error_mean"].idxmax()].set_index("precision")
    rms = first.get("input_rms")
    ratios = [rows[key][ALL] / rows[key][AS_MODEL] for key in rows]
    return {
        "size": first["size"],
        "rms": rms if pd.notna(rms) else None,
        "precisions": precisions,
        "wholly": [(norm, [rows[(norm, p)][ALL] for p in precisions]) for norm in norms],
        "rounding": [max(rows[(n, p)]["input"] for n in norms) for p in precisions],
        "worst": [(worst.loc[p, "low_precision_op"], worst.loc[p, "error_mean"]) for p in precisions],
        "change": span(min(ratios), max(ratios), ".1f", "×"),
        "inside_adds": not max(ratios) < 1.5,
    }


def _overflow(big: pd.DataFrame) -> dict:
    """At the largest scale: where the whole norm's output is lost, and from which operations."""
    whole = big[big["low_precision_op"] == ALL]
    lost = whole[_lost(whole)]
    causes = []
    for (norm, precision), part in big.groupby(["norm", "precision"], sort=False):
        if ((lost["norm"] == norm) & (lost["precision"] == precision)).any():
            ops = part[~part["low_precision_op"].isin([ALL, AS_MODEL]) & _lost(part)]
            causes.append((norm, precision, list(ops["low_precision_op"])))
    kept = whole[~_lost(whole)]
    largest = column(big, "input_abs_max").max()
    return {
        "scale": big["scale"].iloc[0],
        "largest": largest if pd.notna(largest) else None,
        "lost": causes,
        "kept": [(r.norm, r.precision) for r in kept.itertuples()],
        "kept_error": kept["error_mean"].max(),
    }


def _gpu_sizes(rows: pd.DataFrame, low: str) -> tuple[list[dict], pd.DataFrame]:
    """What the GPU gains from `low` (fp32's GPU busy time over `low`'s), per size, and the rows."""
    from lmstudy.sections.timing.tables import gpu_speedups

    key = ["size", "context_length", "pass"]
    gpu = gpu_speedups(rows, key, "fp32", low)
    if gpu.empty:
        return [], gpu
    gpu = gpu.sort_values(key).reset_index(drop=True)
    sizes = []
    for size, part in gpu.groupby("size", observed=True, sort=True):
        longest = part[part["context_length"] == part["context_length"].max()]
        sizes.append({
            "size": size,
            "passes": [(PASS_LABELS.get(r["pass"], r["pass"]), r["gpu_speedup"])
                       for _, r in longest.iterrows()],
            "context": int(longest["context_length"].iloc[0]),
            "spread": (span(part["gpu_speedup"].min(), part["gpu_speedup"].max())
                       if len(part) > len(longest) else None),
            "configurations": count(len(part), "configuration"),
        })
    return sizes, gpu


def _optimizer_clause(rows: pd.DataFrame, low: str, gpu: pd.DataFrame) -> str:
    """Why a training step gains less on the GPU than forward+backward: the optimizer's GPU time (training
    step minus forward+backward), which runs on fp32 master weights in either precision."""
    key = ["size", "context_length"]
    wide = gpu.pivot_table(index=key, columns="pass", values="gpu_speedup", observed=True, aggfunc="first")
    if not {"train_step", "forward_backward"} <= set(wide.columns):
        return ""
    capped = wide[wide["train_step"] < wide["forward_backward"]].dropna()
    if capped.empty:
        return ""
    size, context = capped.index[-1]
    busy = rows.set_index(["size", "context_length", "pass", "precision"])["gpu_busy_ms"]
    try:
        optimizer = {p: busy.loc[(size, context, "train_step", p)]
                     - busy.loc[(size, context, "forward_backward", p)] for p in ("fp32", low)}
    except KeyError:
        return ""
    ratios = capped.loc[(size, context)]
    return _say("optimizer", size=size, train_step=ratios["train_step"],
                forward_backward=ratios["forward_backward"], fp32_ms=optimizer["fp32"], low_ms=optimizer[low],
                low=low)


def _wall_numbers(rows: pd.DataFrame, low: str, step: str) -> dict | None:
    """`low` against fp32 in wall time at the quoted pass: the largest size at its longest context, with its
    interval where the processes give one, each size's ratio at its longest context, and the sizes the host
    sets; None where no configuration ran both."""
    key = ["size", "context_length"]
    fp32 = rows[rows["precision"] == "fp32"].set_index(key)
    other = rows[rows["precision"] == low].set_index(key)
    common = fp32.index.intersection(other.index)
    if common.empty:
        return None
    ratio = (fp32.loc[common, "median_ms"] / other.loc[common, "median_ms"]).sort_index()
    size, context = ratio.index[-1]
    by_size = ratio.groupby(level="size", observed=True).last()
    a, b = fp32.loc[(size, context)], other.loc[(size, context)]
    interval, cvs = None, None
    if {"ci_low_ms", "ci_high_ms"} <= set(rows) and a[["ci_low_ms", "ci_high_ms"]].notna().all():
        interval = {"low": a["ci_low_ms"] / b["ci_high_ms"], "high": a["ci_high_ms"] / b["ci_low_ms"]}
    elif "cv" in rows:
        cvs = (percent(a["cv"]), percent(b["cv"]))
    # The sizes whose wall time the host sets at the quoted context: their wall ratio hides the GPU's.
    longest = rows.groupby("size", observed=True)["context_length"].transform("max")
    shown = rows[(rows["context_length"] == longest) & rows["precision"].isin(["fp32", low])]
    hidden = list(dict.fromkeys(shown[~timing_answers.trusted(shown).to_numpy()]["size"].astype(str)))
    return {
        "low": low, "step": step, "size": size, "context": context, "ratio": ratio.loc[(size, context)],
        "interval": interval, "cvs": cvs, "by_size": list(by_size.items()) if len(by_size) > 1 else [],
        # The wall-time ratio's interval holds 1: not decided.
        "undecided": interval is not None and interval["low"] <= 1 <= interval["high"],
        "hidden": hidden, "wall_by_size": by_size,
    }


def _host_pairs(at: dict, gpu: pd.DataFrame, pass_name: str) -> list[tuple]:
    """Per size the host sets, its wall ratio beside the GPU's at the quoted pass and context."""
    pairs = []
    for name in at["hidden"]:
        there = gpu[(gpu["size"].astype(str) == name) & (gpu["pass"] == pass_name)]
        there = there[there["context_length"] == there["context_length"].max()]
        wall_ratio = at["wall_by_size"].get(name)
        if len(there) and wall_ratio is not None:
            pairs.append((name, wall_ratio, there["gpu_speedup"].iloc[0]))
    return pairs


def _headline_and_trust(at: dict, gpu: pd.DataFrame, pass_name: str, every_pass: pd.DataFrame
                        ) -> tuple[str, str]:
    from lmstudy.analyse.trust import gpu_spread

    cell = gpu[(gpu["size"] == at["size"]) & (gpu["context_length"] == at["context"])
               & (gpu["pass"] == pass_name)] if len(gpu) else gpu
    headline = _say("speedup_headline", at=at, on_gpu=cell["gpu_speedup"].iloc[0] if len(cell) else None)
    spread = gpu_spread(every_pass) if len(cell) else float("nan")
    measured = "spread" if spread == spread else "one step" if len(cell) else None
    trust = _say("speedup_trust", at=at, gpu=measured, spread=percent(spread) if spread == spread else None,
                 cvs=at["cvs"],
                 host_sets=not len(cell) and at["size"] in at["hidden"])
    return headline, trust


SPEEDUP_QUESTION = (
    "benchmarking_mixed_precision (c): how much faster is mixed precision, and how does it change with "
    "model size?"
)


def speedup_answer(timing: pd.DataFrame) -> Answer | None:
    """(c): the low-precision speed-up, from both measures: the GPU's busy time (what the GPU does,
    stable between processes) and the wall time (what the user waits for, set by the host where a step
    is host-bound), each per size at its longest context."""
    every_pass = steady_rows(timing)
    every_pass = every_pass[every_pass["status"] == "ok"]
    lows = [p for p in ("bf16", "fp16") if p in set(every_pass["precision"])]
    if "fp32" not in set(every_pass["precision"]) or not lows:
        return None
    pass_name = ("train_step" if (every_pass["pass"] == "train_step").any()
                 else str(every_pass["pass"].iloc[0]))
    rows = every_pass[every_pass["pass"] == pass_name]
    step = PASS_LABELS.get(pass_name, pass_name)
    sentences, headline, trust = [], "", ""
    for low in lows:
        at = _wall_numbers(rows, low, step)
        if at is None:
            continue
        at["cpu"] = on_cpu(every_pass)
        sizes, gpu = _gpu_sizes(every_pass[every_pass["precision"].isin(["fp32", low])], low)
        if sizes:
            sentences.append(_say("speedup_on_gpu", at=at, sizes=sizes, pairs=_host_pairs(at, gpu, pass_name),
                                  optimizer_words=_optimizer_clause(every_pass, low, gpu)))
        else:
            sentences.append(_say("speedup_wall_only", at=at))
        if not headline:
            headline, trust = _headline_and_trust(at, gpu, pass_name, every_pass)
    if not sentences:
        return None
    source = "precision_fp16_bf16_speedup" if "fp16" in lows else "precision_bf16_speedup"
    return Answer(SPEEDUP_QUESTION, " ".join(sentences), source, headline=headline, trust=trust)


def answers(
    accumulation: pd.DataFrame, dtypes: pd.DataFrame, norms: pd.DataFrame, timing: pd.DataFrame
) -> list[Answer]:
    items = []
    if not accumulation.empty:
        items.append(accumulation_answer(accumulation))
    if not dtypes.empty:
        items.append(dtypes_answer(dtypes))
    items.append(norm_answer(norms))
    speed = speedup_answer(timing) if not timing.empty else None
    items.append(
        speed
        or Answer(
            SPEEDUP_QUESTION,
            _say("no_speedup"),
        )
    )
    return items
