"""Section 1, end-to-end timing: its answers to the course's questions (b) and (c), the model
table and which configurations would fit a smaller GPU.

Trust comes from the rows themselves: where the timing table has the between-process columns
(ci_low_ms, ci_high_ms, process_spread, host_bound, noisy), the answers use them and leave out
the cells they mark; without them, from the step-to-step spread (CV) of one process.
"""

from __future__ import annotations

import statistics

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.tables import steady_rows, steady_warmup
from lmstudy.report.answers import Answer, count, of_all, percent, significant, span
from lmstudy.report.contract import wording
from lmstudy.report.labels import PASS_LABELS, cold_start_costs, in_size_order

# The GPUs a student most often has, by the memory torch.cuda reports for them (total_memory): an
# H100 80GB HBM3 about 79.2 GiB, an A100 40GB about 39.6 GiB.
SMALLER_GPUS = {"80 GB": 79.2 * 2**30, "40 GB": 39.6 * 2**30}
# Within this fraction of a GPU's memory a configuration may or may not fit (the CUDA context,
# fragmentation): called borderline rather than guessed.
BORDERLINE = 0.05
# A second step within this of the steady median has left the cold start behind.
WARM = 0.05


def _steady_ok(frame: pd.DataFrame) -> pd.DataFrame:
    rows = steady_rows(frame)
    return rows[rows["status"] == "ok"]


def _flag(rows: pd.DataFrame, column: str) -> pd.Series:
    """The lead's per-cell mark (host_bound, noisy) as bools; all False where the table lacks it."""
    if column not in rows:
        return pd.Series(False, index=rows.index)
    return rows[column].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))


def trusted(rows: pd.DataFrame) -> pd.Series:
    """Cells that are neither host-bound nor noisy (every cell where the table cannot say)."""
    return ~(_flag(rows, "host_bound") | _flag(rows, "noisy"))


_say = wording(__name__)


Q = {
    "forward_backward": "benchmarking_script (b): how long do the forward and the backward pass take, and "
    "how much do they vary?",
    "warmup": "benchmarking_script (c): what does warming up change, and why?",
    "fit": "Would it fit on an 80 GB (or 40 GB) GPU?",
}


def _cell(row) -> dict:
    """A row's median step time and the interval its processes allow (None where it has none)."""
    low, high = row.get("ci_low_ms"), row.get("ci_high_ms")
    both = pd.notna(low) and pd.notna(high)
    return {"ms": row["median_ms"], "low": low if both else None, "high": high if both else None}


def trust_of(rows: pd.DataFrame) -> str:
    """How far to trust these medians, in words, from the table's own columns."""
    if {"ci_low_ms", "ci_high_ms"} <= set(rows) and rows["ci_low_ms"].notna().any():
        half = ((rows["ci_high_ms"] - rows["ci_low_ms"]) / 2 / rows["median_ms"]).dropna()
        host = _flag(rows, "host_bound")
        limit = None
        if host.any():
            from lmstudy.analyse.trust import thresholds

            limit = thresholds(rows).get("min_gpu_busy")
        return _say("intervals", median=percent(half.median()), most=percent(half.max()), limit=limit,
                    host=of_all(int(host.sum()), len(rows), "cell") if host.any() else None)
    cv = rows["cv"].dropna() if "cv" in rows else pd.Series(dtype=float)
    if cv.empty:
        return ""
    return _say("step_cv", median=percent(cv.median()), most=percent(cv.max()))


def _study_precision(rows: pd.DataFrame) -> str:
    """fp32 where the run timed it, else the first precision it timed."""
    if (rows["precision"] == "fp32").any():
        return "fp32"
    return str(rows["precision"].iloc[0]) if len(rows) else ""


def forward_backward_answer(frame: pd.DataFrame) -> Answer:
    """(b): forward and backward time per size at the longest context, fp32, with trust."""
    rows = _steady_ok(frame)
    precision = _study_precision(rows)
    rows = rows[rows["precision"] == precision]
    wide = rows.pivot_table(
        index=["size", "context_length"], columns="pass", values="median_ms", aggfunc="first", observed=True
    )
    if (
        not {"forward", "forward_backward"} <= set(wide.columns)
        or wide[["forward", "forward_backward"]].dropna().empty
    ):
        return Answer(Q["forward_backward"], _say("no_forward_backward"), "timing_step_time")
    wide = wide.dropna(subset=["forward", "forward_backward"]).reset_index()
    context = int(wide["context_length"].max())
    at = wide[wide["context_length"] == context]
    by_key = rows.set_index(["size", "context_length", "pass"])

    def size_cells(size) -> dict:
        return {"size": size, "forward": _cell(by_key.loc[(size, context, "forward")]),
                "both": _cell(by_key.loc[(size, context, "forward_backward")])}

    first, last = size_cells(at.iloc[0]["size"]), size_cells(at.iloc[-1]["size"])
    text = _say("forward_backward", precision=precision, context=context, first=first,
                last=last if len(at) > 1 else None, backward=_backward(rows), trust=trust_of(rows))
    largest = rows[(rows["size"] == last["size"]) & (rows["context_length"] == context)]
    headline = _say("forward_backward_headline", precision=precision, context=context, largest=last)
    return Answer(Q["forward_backward"], text, "timing_step_time", headline=headline,
                  trust=trust_of(largest))


def _backward(rows: pd.DataFrame) -> dict | None:
    """The backward alone over the forward, from the cells whose times can be trusted (a host-bound
    cell's difference is noise): its span, over how many, and how many were left out."""
    fwd = rows[rows["pass"] == "forward"].set_index(["size", "context_length"])
    both = rows[rows["pass"] == "forward_backward"].set_index(["size", "context_length"])
    good = trusted(fwd.reset_index()).to_numpy()
    keep = fwd.index[good].intersection(both.index[trusted(both.reset_index()).to_numpy()])
    ratio = ((both.loc[keep, "median_ms"] - fwd.loc[keep, "median_ms"]) / fwd.loc[keep, "median_ms"]).dropna()
    if not len(ratio):
        return None
    return {"span": span(ratio.min(), ratio.max()), "configurations": count(len(ratio), "configuration"),
            "left": len(fwd.index.intersection(both.index)) - len(ratio)}


def _early_steps(rows: pd.DataFrame) -> tuple[list, pd.Series]:
    """Each row's first step over its median with the row, and its second step's relative difference
    from it (by row index): the median over its processes of three steps or more."""
    from lmstudy.sections.timing.tables import processes_steps

    first, second, measured = [], [], []
    for index, row in rows.iterrows():
        processes = [steps for steps in processes_steps(row["trajectory_ms"]) if len(steps) >= 3]
        if processes and row["median_ms"] > 0:
            first.append((statistics.median(s[0] for s in processes) / row["median_ms"], row))
            second.append(statistics.median(s[1] for s in processes) / row["median_ms"] - 1)
            measured.append(index)
    return first, pd.Series(second, index=measured, dtype=float)


def warmup_answer(frame: pd.DataFrame) -> Answer:
    """(c): the first steps against the steady state, from windows that share no step.

    The cold start (step 1) from every cell; whether one warm-up step is enough from the cells neither
    host-bound nor noisy (steps 2 to top against the steady window, as the section's finding says it):
    in a host-bound cell the host moves each step by more than the few percent asked about.
    """
    from lmstudy.analyse.trust import thresholds
    from lmstudy.sections.timing.tables import early_over_steady

    rows = _steady_ok(frame)
    if "trajectory_ms" not in rows or rows.empty:
        return Answer(Q["warmup"], _say("no_trajectories"), "timing_warmup")
    first, second = _early_steps(rows)
    if not first:
        return Answer(Q["warmup"], _say("no_three_steps"), "timing_warmup")
    ratios = pd.Series([r for r, _ in first])
    worst = first[int(ratios.idxmax())][1]
    warm = thresholds(frame).get("max_spread", WARM)
    top = steady_warmup(frame)
    configurations = count(len(ratios), "configuration")
    sentences = [_say("cold_start", ratio=ratios.median(), configurations=configurations, most=ratios.max(),
                      costs=cold_start_costs(rows), worst={
                          "size": worst["size"], "context": int(worst["context_length"]),
                          "pass": PASS_LABELS.get(str(worst["pass"]), worst["pass"]),
                          "precision": worst["precision"]})]
    sure = rows[trusted(rows).to_numpy()]
    early = early_over_steady(sure, 1) if len(sure) and top > 1 else pd.DataFrame()
    if len(early):
        sentences += _after_one_step(early, second.abs().drop(index=sure.index, errors="ignore"), top, warm)
        median = float(early["early_over_steady"].median())
        headline = _say("warmup_headline", ratio=ratios.median(), off=percent(abs(median - 1)),
                        most=percent((early["early_over_steady"] - 1).abs().max()))
    else:
        after = second.abs()
        verdict = ("undecided" if sure.empty else "removed" if after.median() < warm
                   else "faster" if second.median() < 0 else "slower")
        sentences.append(_say("second_step", off=percent(after.median()), most=percent(after.max()),
                              verdict=verdict, warm=percent(warm)))
        headline = _say("warmup_headline", ratio=ratios.median(), second=percent(after.median()))
    return Answer(Q["warmup"], " ".join(sentences), "timing_warmup", headline=headline,
                  trust=_say("warmup_trust", configurations=configurations, most=ratios.max()))


def _after_one_step(early: pd.DataFrame, others: pd.Series, top: int, warm: float) -> list[str]:
    """Whether one warm-up step is enough, from the cells neither host-bound nor noisy (`early`), and
    how far the second step of the `others` is off."""
    median = float(early["early_over_steady"].median())
    # A faster step 2 leaves no cold start: enough.
    verdict = "within" if abs(median - 1) <= warm else "faster" if median <= 1 + warm else "slower"
    sentences = [_say("after_one_step", top=top, median=median, most=early["early_over_steady"].max(),
                      configurations=count(len(early), "configuration"), verdict=verdict, warm=percent(warm))]
    if len(others):
        # The median over those other cells, not over all (review: "the other 24 ... 7.9%" was all 27's).
        sentences.append(_say("other_cells", cells=len(others), off=percent(others.median())))
    return sentences


@computes_table
def model_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The model of each size: dimensions, vocabulary, batch, its parameters and those that take part
    in a matrix product (the N of 6N: no embedding, position, norm or bias), each context length's where a
    model's parameters depend on it (learned positions)."""
    columns = ["size", "d_model", "d_ff", "num_layers", "num_heads", "vocab_size", "batch_size", "params"]
    if not set(columns) <= set(frame):
        return pd.DataFrame()
    # The model's label and what counted its FLOPs, where the rows have them (runs since model: exists).
    named = [c for c in ("model", "flops_counted_by") if c in frame]
    in_matmuls = "matmul_params" in frame and frame["matmul_params"].notna().all()
    frame = frame if "context_length" in frame else frame.assign(context_length=0)
    contexts = frame.drop_duplicates(["size", "context_length"]).sort_values(["size", "context_length"])
    if not in_matmuls:  # runs from before the count: the token embedding alone taken out, as said
        embedding = contexts["vocab_size"] * contexts["d_model"]
        contexts = contexts.assign(matmul_params=contexts["params"] - embedding)
    rows = contexts.drop_duplicates("size")[columns + named]
    return pd.DataFrame(
        {
            **({"model": rows["model"].astype(str)} if "model" in rows else {}),
            "size": rows["size"].astype(str),
            "d_model": rows["d_model"],
            "d_ff": rows["d_ff"],
            "layers": rows["num_layers"],
            "heads": rows["num_heads"],
            "vocabulary": rows["vocab_size"],
            "batch": rows["batch_size"],
            "parameters (M)": rows["size"].map(lambda size: _by_context(contexts, size, "params")),
            ("in matrix products (M)" if in_matmuls else "without the token embedding (M)"):
                rows["size"].map(lambda size: _by_context(contexts, size, "matmul_params")),
            **({"attention as run": rows["size"].map(lambda size: _attention_run(frame, size))}
               if "attention_ran" in frame and "variant" in frame else {}),
            **({"FLOPs counted by": rows["flops_counted_by"].astype(str)}
               if "flops_counted_by" in rows else {}),
        }
    ).reset_index(drop=True)


def _attention_run(frame: pd.DataFrame, size: str) -> str:
    """What attention each variant of a size ran, as its measuring processes saw the operators
    (a user's model built as its factory builds it is the variant "naive", whatever it runs)."""
    part = frame[(frame["size"] == size) & frame["attention_ran"].notna()]
    seen = part.drop_duplicates(["variant", "attention_ran"])
    pairs = zip(seen["variant"], seen["attention_ran"], strict=True)
    return "; ".join(f"{variant}: {ran}" for variant, ran in pairs)


def _by_context(contexts: pd.DataFrame, size: str, column: str) -> str:
    """A size's millions of `column` (three significant digits: one precision for the column would show
    a tiny model as 0), one number where every context length has the same, else each context's."""
    part = contexts[contexts["size"] == size]
    values = part[column] / 1e6
    if values.nunique() <= 1:
        return significant(values.iloc[0])
    pairs = zip(part["context_length"], values, strict=True)
    return ", ".join(f"{significant(v)} (ctx {int(c)})" for c, v in pairs)


def gpu_memory_bytes(frame: pd.DataFrame) -> float | None:
    """The run's GPU memory (the environment's gpu_memory_bytes), or None where unrecorded (CPU)."""
    if "gpu_memory_bytes" not in frame:
        return None
    values = pd.to_numeric(frame["gpu_memory_bytes"], errors="coerce").dropna()
    return float(values.max()) if len(values) else None


def _fits(peak: float, capacity: float) -> str:
    if peak > capacity * (1 + BORDERLINE):
        return "does not fit"
    if peak > capacity * (1 - BORDERLINE):
        return "borderline"
    return "fits"


@computes_table
def fit_table(frame: pd.DataFrame) -> pd.DataFrame:
    """For a run on a GPU larger than 80 GB: the configurations that would not fit in 80 GB (or
    40 GB), from the memory each process reserved from the device at its peak.

    A smaller GPU's OOM rows already say this; on a larger one nothing fails, so it is computed.
    Empty when the run's GPU is not larger, or nothing comes within reach of 40 GB.
    """
    capacity = gpu_memory_bytes(frame)
    if capacity is None or capacity <= max(SMALLER_GPUS.values()) * (1 + BORDERLINE):
        return pd.DataFrame()
    rows = _steady_ok(frame)
    # What the process took from the device (reserved) where recorded, else what tensors held.
    columns = ("peak_reserved_bytes", "peak_allocated_bytes")
    peaks = [c for c in columns if c in rows and rows[c].notna().any()]
    if not peaks:
        return pd.DataFrame()
    peak_column = peaks[0]
    rows = rows[rows[peak_column].notna()]
    smallest = min(SMALLER_GPUS.values())
    rows = rows[rows[peak_column] > smallest * (1 - BORDERLINE)]
    if rows.empty:
        return pd.DataFrame()
    table = pd.DataFrame(
        {
            "size": rows["size"].astype(str),
            "context": rows["context_length"],
            "pass": rows["pass"].astype(str).map(PASS_LABELS),
            "precision": rows["precision"],
            "peak reserved GiB": rows[peak_column] / 2**30,
        }
    )
    for name, bytes_ in SMALLER_GPUS.items():
        table[fits_column(name)] = [_fits(p, bytes_) for p in rows[peak_column]]
    return in_size_order(table.sort_values(["context", "pass", "precision"]).reset_index(drop=True))


def fits_column(gpu: str) -> str:
    """The fit table's header for a GPU of `gpu` ('80 GB'): 'fits in 80 GB'."""
    return f"fits in {gpu}"


def fit_answer(table: pd.DataFrame) -> Answer | None:
    if table.empty:
        return None
    out = table[table[fits_column("80 GB")] != "fits"]
    shown = [{"size": r["size"], "context": r["context"], "pass": r["pass"], "precision": r["precision"],
              "gib": r["peak reserved GiB"], "fits": r[fits_column("80 GB")]}
             for _, r in out.head(4).iterrows()]
    text = _say("fit", out=len(out), shown=shown, more=len(out) > 4,
                on_40=int((table[fits_column("40 GB")] != "fits").sum()))
    return Answer(Q["fit"], text, "timing_fit_smaller_gpus",
                  headline=_say("fit_headline", out=len(out)) if len(out) else "", trust=_say("fit_trust"))


def answers(frame: pd.DataFrame) -> list[Answer]:
    """The section's answers, from the study model's rows (timing.csv, every warm-up)."""
    if frame.empty:
        return []
    items = [forward_backward_answer(frame), warmup_answer(frame)]
    fit = fit_answer(fit_table(frame))
    if fit is not None:
        items.append(fit)
    return items
