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


def _interval(row) -> str:
    low, high = row.get("ci_low_ms"), row.get("ci_high_ms")
    if pd.notna(low) and pd.notna(high):
        return f" (95% interval {low:.3g}–{high:.3g})"
    return ""


def _time(row) -> str:
    return f"{row['median_ms']:.3g} ms{_interval(row)}"


def trust_of(rows: pd.DataFrame) -> str:
    """How far to trust these medians, in words, from the table's own columns."""
    if {"ci_low_ms", "ci_high_ms"} <= set(rows) and rows["ci_low_ms"].notna().any():
        half = ((rows["ci_high_ms"] - rows["ci_low_ms"]) / 2 / rows["median_ms"]).dropna()
        text = f"95% intervals ±{percent(half.median())} (median), at most ±{percent(half.max())}"
        host = _flag(rows, "host_bound")
        if host.any():
            from lmstudy.analyse.trust import thresholds

            limit = thresholds(rows).get("min_gpu_busy")
            text += (f"; {of_all(int(host.sum()), len(rows), 'cell')} host-bound (the GPU busy for less than "
                     + (f"{limit:.0%}" if limit is not None else "noise.min_gpu_busy")
                     + " of the step: the host's launches and Python set part of the wall time)")
        return text
    cv = rows["cv"].dropna() if "cv" in rows else pd.Series(dtype=float)
    if cv.empty:
        return ""
    return f"one process each: step-to-step CV {percent(cv.median())} (median), at most {percent(cv.max())}"


def forward_backward_answer(frame: pd.DataFrame) -> Answer:
    """(b): forward and backward time per size at the longest context, fp32, with trust."""
    question = (
        "benchmarking_script (b): how long do the forward and the backward pass take, and how much do they "
        "vary?"
    )
    rows = _steady_ok(frame)
    precision = (
        "fp32" if (rows["precision"] == "fp32").any() else str(rows["precision"].iloc[0]) if len(rows) else ""
    )
    rows = rows[rows["precision"] == precision]
    wide = rows.pivot_table(
        index=["size", "context_length"], columns="pass", values="median_ms", aggfunc="first", observed=True
    )
    if (
        not {"forward", "forward_backward"} <= set(wide.columns)
        or wide[["forward", "forward_backward"]].dropna().empty
    ):
        return Answer(
            question,
            "Not answered: the run has no forward and forward+backward timings of one "
            "configuration (see the timing table for what it has).",
            "timing_step_time",
        )
    wide = wide.dropna(subset=["forward", "forward_backward"]).reset_index()
    context = int(wide["context_length"].max())
    at = wide[wide["context_length"] == context]
    first, last = at.iloc[0], at.iloc[-1]
    by_key = rows.set_index(["size", "context_length", "pass"])

    def cell(size, pass_name):
        return by_key.loc[(size, context, pass_name)]

    sizes = f"{first['size']}" if len(at) == 1 else f"{first['size']} to {last['size']}"
    text = (
        f"In {precision} at context {context}, a forward pass takes "
        f"{_time(cell(first['size'], 'forward'))}"
        + (
            f" ({first['size']}) to {_time(cell(last['size'], 'forward'))} ({last['size']})"
            if len(at) > 1
            else ""
        )
        + f", forward+backward {_time(cell(first['size'], 'forward_backward'))}"
        + (f" to {_time(cell(last['size'], 'forward_backward'))}" if len(at) > 1 else "")
        + f" ({sizes})."
    )
    # The backward from the cells whose times can be trusted: a host-bound cell's difference is noise.
    fwd = rows[rows["pass"] == "forward"].set_index(["size", "context_length"])
    both = rows[rows["pass"] == "forward_backward"].set_index(["size", "context_length"])
    good = trusted(fwd.reset_index()).to_numpy()
    keep = fwd.index[good].intersection(both.index[trusted(both.reset_index()).to_numpy()])
    ratio = ((both.loc[keep, "median_ms"] - fwd.loc[keep, "median_ms"]) / fwd.loc[keep, "median_ms"]).dropna()
    if len(ratio):
        left = len(fwd.index.intersection(both.index)) - len(ratio)
        text += (
            f" The backward alone (forward+backward minus forward) takes {span(ratio.min(), ratio.max())}× "
            f"the forward over {count(len(ratio), 'configuration')}"
            + (f", leaving out {left} host-bound or noisy ones" if left else "")
            + "."
        )
    trust = trust_of(rows)
    if trust:
        text += f" Variation: {trust}."
    largest = rows[(rows["size"] == last["size"]) & (rows["context_length"] == context)]
    headline = (
        f"{last['size']} at context {context} in {precision}: forward "
        f"{_time(cell(last['size'], 'forward'))}, "
        f"forward+backward {_time(cell(last['size'], 'forward_backward'))} per step."
    )
    return Answer(question, text, "timing_step_time", headline=headline, trust=trust_of(largest))


def warmup_answer(frame: pd.DataFrame) -> Answer:
    """(c): the first steps against the steady state, from windows that share no step.

    The cold start (step 1) from every cell; whether one warm-up step is enough from the cells neither
    host-bound nor noisy (steps 2 to top against the steady window, as the section's finding says it):
    in a host-bound cell the host moves each step by more than the few percent asked about.
    """
    from lmstudy.analyse.trust import thresholds
    from lmstudy.sections.timing.tables import early_over_steady, processes_steps

    question = "benchmarking_script (c): what does warming up change, and why?"
    rows = _steady_ok(frame)
    if "trajectory_ms" not in rows or rows.empty:
        return Answer(
            question, "Not answered: the timing table has no per-step trajectories.", "timing_warmup"
        )
    first, second, measured = [], [], []
    for index, row in rows.iterrows():
        # Each process's first and second step against the row's median; the median over processes.
        processes = [steps for steps in processes_steps(row["trajectory_ms"]) if len(steps) >= 3]
        if processes and row["median_ms"] > 0:
            first.append((statistics.median(s[0] for s in processes) / row["median_ms"], row))
            second.append(statistics.median(s[1] for s in processes) / row["median_ms"] - 1)
            measured.append(index)
    if not first:
        return Answer(question, "Not answered: no trajectory has three steps.", "timing_warmup")
    ratios = pd.Series([r for r, _ in first])
    worst = first[int(ratios.idxmax())][1]
    after = pd.Series(second, index=measured).abs()
    warm = thresholds(frame).get("max_spread", WARM)
    top = steady_warmup(frame)
    text = (
        f"Without warm-up the first step takes {ratios.median():.1f}× the steady median (median over "
        f"{count(len(ratios), 'configuration')}; up to {ratios.max():.1f}× for {worst['size']} ctx "
        f"{int(worst['context_length'])} {PASS_LABELS.get(str(worst['pass']), worst['pass'])} "
        f"{worst['precision']}): it pays one-time costs ({cold_start_costs(rows)})."
    )
    sure = rows[trusted(rows).to_numpy()]
    early = early_over_steady(sure, 1) if len(sure) and top > 1 else pd.DataFrame()
    if len(early):
        median = float(early["early_over_steady"].median())
        enough = median <= 1 + warm  # a faster step 2 leaves no cold start: enough
        text += (
            f" After one warm-up step, {'step 2 takes' if top == 2 else f'steps 2 to {top} take'} "
            f"{median:.3f}× the steady window's median "
            f"(steps {top + 1} on) in the {count(len(early), 'configuration')} neither host-bound nor noisy, "
            f"whose time is the GPU's (at most {early['early_over_steady'].max():.3f}×): one warm-up step "
            + (f"is enough (within {percent(warm)})." if abs(median - 1) <= warm
               else f"is enough, though the steps after it are more than {percent(warm)} faster than the "
                    "steady window (which slows later on)." if enough
               else f"is not enough (more than {percent(warm)} slower).")
        )
        others = after.drop(index=sure.index, errors="ignore")
        if len(others):
            # The median over those other cells, not over all (review: "the other 24 ... 7.9%" was all 27's).
            text += (
                f" In the other {len(others)} the second step is {percent(others.median())} off "
                "the steady median (median), within what the host moves a step from one to the next, so "
                "they do not decide it."
            )
        headline = (
            f"Without warm-up the first step takes {ratios.median():.1f}× the steady median; after one "
            f"warm-up step the cells neither host-bound nor noisy are {percent(abs(median - 1))} off "
            f"steady (median; at most {percent((early['early_over_steady'] - 1).abs().max())})."
        )
    else:
        text += (
            f" The second step is {percent(after.median())} off the steady median (median; at most "
            f"{percent(after.max())})"
            + (", but every cell is host-bound or noisy: the host moves a step by as much, so whether one "
               "warm-up step is enough is not decided here." if sure.empty else
               (": one warm-up step removes the cold start." if after.median() < warm
                else f": more than {percent(warm)} faster, so the steady window, not the first steps, "
                     "is what slows." if pd.Series(second).median() < 0
                else f": more than {percent(warm)} slower, so one warm-up step is not enough here."))
        )
        headline = (
            f"Without warm-up the first step takes {ratios.median():.1f}× the steady median; the second "
            f"is {percent(after.median())} off it."
        )
    return Answer(
        question,
        text,
        "timing_warmup",
        headline=headline,
        trust=f"median over {count(len(ratios), 'configuration')}, up to {ratios.max():.1f}×",
    )


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
    text = (
        f"This GPU ran everything; on an 80 GB GPU {len(out)} of the configurations measured here would not "
        "fit or are borderline"
        + (
            ": "
            + "; ".join(
                f"{r['size']} ctx {r['context']} {r['pass']} {r['precision']} "
                f"({r['peak reserved GiB']:.1f} GiB, "
                f"{r[fits_column('80 GB')]})"
                for _, r in out.head(4).iterrows()
            )
            + ("; …" if len(out) > 4 else "")
            if len(out)
            else ""
        )
        + f". On a 40 GB GPU, {int((table[fits_column('40 GB')] != 'fits').sum())} would not fit or are "
        "borderline."
    )
    headline = (
        f"On an 80 GB GPU {len(out)} of the configurations this GPU ran would not fit or are borderline."
        if len(out)
        else ""
    )
    return Answer(
        "Would it fit on an 80 GB (or 40 GB) GPU?",
        text,
        "timing_fit_smaller_gpus",
        headline=headline,
        trust="peak memory reserved by each process, the CUDA context not counted",
    )


def answers(frame: pd.DataFrame) -> list[Answer]:
    """The section's answers, from the study model's rows (timing.csv, every warm-up)."""
    if frame.empty:
        return []
    items = [forward_backward_answer(frame), warmup_answer(frame)]
    fit = fit_answer(fit_table(frame))
    if fit is not None:
        items.append(fit)
    return items
