"""Section 3, mixed precision: its answers to the course's questions, and the table of the
normalisation experiment (lmstudy/measure/norm_precision.py) they read."""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.tables import steady_rows
from lmstudy.report.answers import Answer, count, percent, span
from lmstudy.report.coverage import column
from lmstudy.report.labels import PASS_LABELS, on_cpu
from lmstudy.sections.timing import answers as timing_answers

ALL = "(every operation)"  # as lmstudy.measure.norm_precision names them (no torch here)
AS_MODEL = "(fp32 inside, as the study model)"
# What that row computes, in words that claim no more: the experiment rounds the norm's input and
# output to the low precision, which the study model under autocast does not (its residual stream
# stays float32, as its dtype table shows).
AS_MODEL_SHOWN = "fp32 inside, input and output rounded (the study model's RMSNorm on a low-precision input)"


def accumulation_answer(frame: pd.DataFrame) -> Answer:
    by = frame.set_index("method")

    def result(method: str) -> str:
        row = by.loc[method]
        return f"{row['result']:.4f} (error {row['abs_error']:.2g})"

    worst = by["abs_error"].idxmax()
    best = by["abs_error"].idxmin()
    text = (
        f"Adding 0.01 a thousand times: {best} gives {result(best)}, {worst} {result(worst)}"
        + "".join(f"; {m} {result(m)}" for m in by.index if m not in (best, worst))
        + ". The error of a low-precision sum grows as it rounds each addition; an fp32 accumulator keeps "
        "only the error of storing 0.01 in fp16, which is why mixed precision accumulates in fp32."
    )
    question = "mixed_precision_accumulation: fp32 vs fp16, and fp16 into an fp32 accumulator"
    return Answer(question, text, "precision_accumulation")


def dtypes_answer(frame: pd.DataFrame) -> Answer:
    """(a): the dtypes observed under each autocast, grouped by dtype."""
    parts = []
    for precision in ("fp16", "bf16"):
        part = frame[(frame["precision"] == precision) & (frame["tensor"] != "(all)")]
        if part.empty:
            gone = frame[frame["precision"] == precision]
            if len(gone):
                parts.append(f"{precision} autocast did not run here ({gone['note'].iloc[0]})")
            continue
        # Every parameter (and gradient) in one word when they all share a dtype: the layers differ.
        shown = part["tensor"].where(~part["tensor"].str.startswith("parameter "), "parameters")
        shown = shown.where(~part["tensor"].str.startswith("gradient of "), "gradients")
        shown = shown.str.replace(r"^output of (\w+) \((\w+)\)$", r"\2 \1", regex=True)
        groups = (
            part.assign(tensor=shown)
            .groupby("dtype", sort=False)["tensor"]
            .apply(lambda t: ", ".join(dict.fromkeys(t)))
        )
        parts.append(f"under {precision} autocast, " + "; ".join(f"{d}: {t}" for d, t in groups.items()))
    text = (
        ("Observed at run time: " + ". ".join(parts) + ".")
        if parts
        else "Not answered: no dtype was observed."
    )
    return Answer(
        "benchmarking_mixed_precision (a): which dtypes do the parameters, outputs, loss and gradients have "
        "under autocast?",
        text,
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


def norm_answer(frame: pd.DataFrame) -> Answer:
    """(b): which operation of RMSNorm and LayerNorm causes the low-precision error, measured."""
    question = (
        "benchmarking_mixed_precision (b): what in the normalisation layer is sensitive to low precision; "
        "does bf16 still need it in fp32?"
    )
    if frame.empty:
        return Answer(question, "Not answered: the normalisation experiment produced no rows.")
    base = frame[frame["scale"] == frame["scale"].min()]
    first = base.iloc[0]
    precisions = list(dict.fromkeys(base["precision"]))

    def per_precision(values: dict) -> str:
        return " / ".join(f"{values[p]:.1e}" for p in precisions)

    rows = {
        key: part.set_index("low_precision_op")["error_mean"]
        for key, part in base.groupby(["norm", "precision"])
    }
    norms = list(dict.fromkeys(base["norm"]))
    wholly = "; ".join(
        f"{norm} {per_precision({p: rows[(norm, p)][ALL] for p in precisions})}"
        for norm in dict.fromkeys(base["norm"])
    )
    rounding = per_precision({p: max(rows[(n, p)]["input"] for n in norms) for p in precisions})
    singles = base[~base["low_precision_op"].isin([ALL, AS_MODEL, "input"])]
    worst = singles.loc[singles.groupby("precision")["error_mean"].idxmax()].set_index("precision")
    rms = first.get("input_rms")
    sentences = [
        f"On the residual stream entering the built-in model's final norm (size {first['size']}, RMS "
        + (f"{rms:.2g}" if pd.notna(rms) else "not recorded in this run") + "), computed "
        f"wholly in {' / '.join(precisions)} the norm is off from fp32 by {wholly} (mean relative error); "
        f"rounding the input alone gives {rounding}, and the worst single operation adds "
        + " / ".join(
            f"'{worst.loc[p, 'low_precision_op']}' {worst.loc[p, 'error_mean']:.1e}" for p in precisions
        )
        + "."
    ]
    ratios = [rows[key][ALL] / rows[key][AS_MODEL] for key in rows]
    low, high = min(ratios), max(ratios)
    sentences.append(
        f"Computing inside in fp32 and casting back, as the built-in model's RMSNorm does for a "
        f"low-precision input, changes that {span(low, high, '.1f', '×')} (under autocast the built-in "
        "model's residual stream stays float32, so there its norm rounds neither input nor output): "
        + (
            "at this scale the error is the rounding of the input and output, not the inside operations."
            if high < 1.5
            else "the inside operations add error of their own, which fp32 removes."
        )
    )
    if frame["scale"].nunique() > 1:
        big = frame[frame["scale"] == frame["scale"].max()]
        whole = big[big["low_precision_op"] == ALL]
        lost = whole[_lost(whole)]
        scale = big["scale"].iloc[0]
        if len(lost):
            causes = []
            for (norm, precision), part in big.groupby(["norm", "precision"], sort=False):
                if ((lost["norm"] == norm) & (lost["precision"] == precision)).any():
                    ops = part[~part["low_precision_op"].isin([ALL, AS_MODEL]) & _lost(part)]
                    causes.append(f"{norm} {precision} (from '{', '.join(ops['low_precision_op'])}')")
            kept = whole[~_lost(whole)]
            largest = column(big, "input_abs_max").max()
            sentences.append(
                f"At {scale:g}× the activations "
                + (f"(|x| up to {largest:.3g}) " if pd.notna(largest)
                   else "(their largest |x| not recorded in this run) ")
                + "the "
                f"output is lost in {'; '.join(causes)}: the squares overflow fp16's largest value, 65504"
                + (
                    f", while {', '.join(f'{r.norm} {r.precision}' for r in kept.itertuples())} stay within "
                    f"{kept['error_mean'].max():.1e}"
                    if len(kept)
                    else ""
                )
                + ". fp16's risk is range, bf16's precision (8 significant bits against fp16's 11): both "
                "keep the norm's reductions in fp32."
            )
        else:
            sentences.append(f"At {scale:g}× the activations nothing overflows.")
    whole = base[base["low_precision_op"] == ALL].set_index(["norm", "precision"])["error_mean"]
    headline = (
        "Normalisation computed wholly in low precision is off from fp32 by "
        + ", ".join(f"{e:.1e} ({n} {p})" for (n, p), e in whole.items())
        + "."
    )
    return Answer(
        question,
        " ".join(sentences),
        "precision_norm_errors",
        headline=headline,
        # The experiment runs the built-in model's norms whatever model: names (lmstudy measure norms).
        trust=f"mean relative error over {int(first['tokens'])} tokens of the built-in model's activations",
    )


def _gpu_clause(rows: pd.DataFrame, low: str) -> tuple[str, pd.DataFrame]:
    """What the GPU gains from `low` (fp32's GPU busy time over `low`'s), per size, and the rows."""
    from lmstudy.sections.timing.tables import gpu_speedups

    key = ["size", "context_length", "pass"]
    gpu = gpu_speedups(rows, key, "fp32", low)
    if gpu.empty:
        return "", gpu
    gpu = gpu.sort_values(key).reset_index(drop=True)
    parts = []
    for size, part in gpu.groupby("size", observed=True, sort=True):
        longest = part[part["context_length"] == part["context_length"].max()]
        each = ", ".join(f"{PASS_LABELS.get(r['pass'], r['pass'])} {r['gpu_speedup']:.2f}×"
                         for _, r in longest.iterrows())
        words = f"{size}: {each} at context {int(longest['context_length'].iloc[0])}"
        if len(part) > len(longest):
            words += f" ({span(part['gpu_speedup'].min(), part['gpu_speedup'].max())}× over its " \
                     f"{count(len(part), 'configuration')})"
        parts.append(words)
    return "; ".join(parts), gpu


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
    return (
        f" The training step gains less than forward+backward ({size}: {ratios['train_step']:.2f}× against "
        f"{ratios['forward_backward']:.2f}×): its optimizer's GPU time (training step minus "
        f"forward+backward) is {optimizer['fp32']:.3g} ms in fp32 and {optimizer[low]:.3g} ms in {low}, "
        "the same update of fp32 master weights in both."
    )


def speedup_answer(timing: pd.DataFrame) -> Answer | None:
    """(c): the low-precision speed-up, from both measures: the GPU's busy time (what the GPU does,
    stable between processes) and the wall time (what the user waits for, set by the host where a step
    is host-bound), each per size at its longest context."""
    from lmstudy.analyse.trust import gpu_spread

    question = (
        "benchmarking_mixed_precision (c): how much faster is mixed precision, and how does it change with "
        "model size?"
    )
    rows = steady_rows(timing)
    rows = rows[rows["status"] == "ok"]
    lows = [p for p in ("bf16", "fp16") if p in set(rows["precision"])]
    if "fp32" not in set(rows["precision"]) or not lows:
        return None
    every_pass = rows
    pass_name = "train_step" if (rows["pass"] == "train_step").any() else str(rows["pass"].iloc[0])
    rows = rows[rows["pass"] == pass_name]
    key = ["size", "context_length"]
    fp32 = rows[rows["precision"] == "fp32"].set_index(key)
    step = PASS_LABELS.get(pass_name, pass_name)
    sentences, headline, trust = [], "", ""
    for low in lows:
        other = rows[rows["precision"] == low].set_index(key)
        common = fp32.index.intersection(other.index)
        if common.empty:
            continue
        ratio = (fp32.loc[common, "median_ms"] / other.loc[common, "median_ms"]).sort_index()
        size, context = ratio.index[-1]
        by_size = ratio.groupby(level="size", observed=True).last()
        gpu_words, gpu = _gpu_clause(every_pass[every_pass["precision"].isin(["fp32", low])], low)
        interval = ""
        wall_trust = ""
        undecided = False  # the wall-time ratio's interval holds 1
        if {"ci_low_ms", "ci_high_ms"} <= set(rows) and fp32.loc[
            (size, context), ["ci_low_ms", "ci_high_ms"]
        ].notna().all():
            a, b = fp32.loc[(size, context)], other.loc[(size, context)]
            lo, hi = a["ci_low_ms"] / b["ci_high_ms"], a["ci_high_ms"] / b["ci_low_ms"]
            undecided = lo <= 1 <= hi
            interval = f" (interval {lo:.2f}–{hi:.2f}×" + (", which holds 1)" if undecided else ")")
            wall_trust = f"wall time's interval {lo:.2f}–{hi:.2f}×"
        elif "cv" in rows:
            a, b = fp32.loc[(size, context)], other.loc[(size, context)]
            wall_trust = (f"one process each: step-to-step CV {percent(a['cv'])} (fp32), "
                          f"{percent(b['cv'])} ({low})")
        # The sizes whose wall time the host sets at the quoted context: their wall ratio hides the GPU's.
        longest = rows.groupby("size", observed=True)["context_length"].transform("max")
        shown = rows[(rows["context_length"] == longest) & rows["precision"].isin(["fp32", low])]
        hidden = list(dict.fromkeys(shown[~timing_answers.trusted(shown).to_numpy()]["size"].astype(str)))
        # A ratio whose interval holds 1 is not decided: given with its interval, never as a fact.
        wall = (
            (f"{low} autocast's {step} is not told apart from fp32's for {size} at context {context} "
             f"({ratio.loc[(size, context)]:.2f}×{interval.replace(' (', ', ', 1)}"
             if undecided else
             f"{low} autocast runs the {step} {ratio.loc[(size, context)]:.2f}× as fast as fp32 for {size} "
             f"at context {context}{interval}")
            + ("; at each size's longest context: " + ", ".join(f"{s} {v:.2f}×" for s, v in by_size.items())
               if len(by_size) > 1 else "")
        )
        if gpu_words:
            sentences.append(f"On the GPU (its busy time per step), {low} autocast is faster than fp32 by "
                             f"{gpu_words}. In wall time, what the user waits for, {wall}.")
            if hidden:
                # Per hidden size, the wall ratio beside the GPU's at the quoted pass and context: how much
                # of the GPU's gain the host leaves to the user.
                pairs = []
                for name in hidden:
                    at = gpu[(gpu["size"].astype(str) == name) & (gpu["pass"] == pass_name)]
                    at = at[at["context_length"] == at["context_length"].max()]
                    wall_ratio = by_size.get(name)
                    if len(at) and wall_ratio is not None:
                        pairs.append(f"{name} {wall_ratio:.2f}× in wall time against "
                                     f"{at['gpu_speedup'].iloc[0]:.2f}× on the GPU")
                sentences.append(
                    "Where a step is host-bound or noisy (†‡), the host hides part or all of the GPU's gain: "
                    "it waits for Python and kernel launches, which lower precision does not make faster"
                    + (f" ({step}: {'; '.join(pairs)})" if pairs else "") + ".")
            sentences.append(_optimizer_clause(every_pass, low, gpu).strip())
        else:
            sentences.append(f"In wall time, {wall}." + (
                (f" Noisy there (‡): {', '.join(hidden)}; its processes disagree, so the wall-time ratio is "
                 "not decided." if on_cpu(every_pass) else
                 f" Host-bound or noisy there (†‡): {', '.join(hidden)}; the wall-time ratio tells the "
                 "host's overhead more than the GPU's arithmetic, and this run recorded no GPU busy time "
                 "to tell it.")
                if hidden else ""))
        if not headline:
            cell = gpu[(gpu["size"] == size) & (gpu["context_length"] == context)
                       & (gpu["pass"] == pass_name)] if len(gpu) else gpu
            on_gpu = f"{cell['gpu_speedup'].iloc[0]:.2f}× as fast as fp32 on the GPU, " if len(cell) else ""
            headline = (
                f"{low} autocast makes {size}'s {step} at context {context} {on_gpu}"
                f"{ratio.loc[(size, context)]:.2f}× in wall time"
                + (f", not decided{interval}" if undecided else "")
                + ((" (noisy: its processes disagree, so the wall-time ratio is not decided)"
                    if on_cpu(every_pass) else
                    " (host-bound or noisy: the host's launches fill part of that step)") if size in hidden
                   else "") + "."
            )
            spread = gpu_spread(every_pass) if len(cell) else float("nan")
            trust = "; ".join(filter(None, [
                (f"GPU busy time within {percent(spread)} between processes" if spread == spread
                 else "GPU busy time from one profiled step" if len(cell) else ""),
                wall_trust,
                "" if len(cell) or size not in hidden else "host-bound or noisy: the host sets the wall time",
            ]))
    sentences = [s for s in sentences if s]
    if not sentences:
        return None
    source = "precision_fp16_bf16_speedup" if "fp16" in lows else "precision_bf16_speedup"
    return Answer(question, " ".join(sentences), source, headline=headline, trust=trust)


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
            "benchmarking_mixed_precision (c): how much faster is mixed precision, and how does it change "
            "with model size?",
            "Not answered: the timing section did not measure fp32 and a lower precision of one "
            "configuration.",
        )
    )
    return items
