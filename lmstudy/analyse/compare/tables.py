"""Each section's numbers of two runs matched by configuration, with ratios B/A and verdicts.

Every function takes the two runs (lmstudy.analyse.compare.runs.Run) and returns a
tidy frame: one row per configuration found in either run, so a
configuration measured in one run only, or out of memory in one, is a row
that says so rather than a row dropped.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from lmstudy.analyse.compare import verdict as V
from lmstudy.analyse.compare.runs import Run

TIMING_KEY = ["size", "context_length", "pass", "precision", "variant"]
PROFILE_KEY = ["size", "context_length", "pass", "precision"]
MEMORY_KEY = ["size", "context_length", "pass", "precision"]
ATTENTION_KEY = ["implementation", "precision", "head_dim", "seq_len"]
COMPILE_KEY = ["size", "context_length", "precision", "attention", "pass", "mode"]
LADDER_KEY = ["size", "context_length", "rung_key"]
MEMORY_KINDS = (
    "parameters", "gradients", "optimizer_state", "activations", "temporaries", "other", "before_recording",
)
MISSING_STATUS = "not measured"


def presence(status_a, status_b) -> str:
    """The verdict of a row that cannot be compared, or '' when both sides are ok."""
    a_missing, b_missing = pd.isna(status_a), pd.isna(status_b)
    if a_missing and b_missing:
        return "in neither run"
    if a_missing:
        return "only in B"
    if b_missing:
        return "only in A"
    if status_a == "ok" and status_b == "ok":
        return ""
    if status_a == status_b:
        return f"{status_a} in both"
    if status_b == "ok":
        return f"{status_a} in A"
    if status_a == "ok":
        return f"{status_b} in B"
    return f"{status_a} in A, {status_b} in B"


def _join(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Outer join of A's and B's rows on `key` (columns suffixed _a, _b); A's order, then B's extra rows."""
    a = a.assign(_in_a=True).set_index(key)
    b = b.assign(_in_b=True).set_index(key)
    joined = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer", sort=False)
    order = list(a.index) + [k for k in b.index if k not in set(a.index)]
    return joined.reindex(order).reset_index()


def _join_table(a: Run, b: Run, table: str, key: list[str], columns) -> pd.DataFrame:
    """Both runs' `table` (those of `columns` it has, and status), joined on `key` (see _join)."""
    parts = []
    for run in (a, b):
        frame = run[table]
        if frame.empty:
            parts.append(pd.DataFrame(columns=[*key, "status"]))
        else:
            parts.append(frame[[c for c in (*key, "status", *columns) if c in frame]])
    return _join(parts[0], parts[1], key)


def _steady(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["warmup_steps"] == frame["warmup_steps"].max()]


def _samples(cell) -> list[float]:
    if not isinstance(cell, str) or not cell:
        return []
    try:
        return [float(x) for x in json.loads(cell)]
    except (ValueError, TypeError):
        return []


def _result_columns(result: V.Comparison) -> dict:
    return {
        "ratio": result.ratio,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "p_value": result.p_value,
        "verdict": result.verdict,
        "n_a": result.n_a,
        "n_b": result.n_b,
    }


_EMPTY_RESULT = {"ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan,
                 "n_a": 0, "n_b": 0}


def timing(a: Run, b: Run, min_effect: float = V.MIN_EFFECT, alpha: float = V.ALPHA,
           unfair_sizes: frozenset = frozenset()) -> pd.DataFrame:
    """Section 1 (and the variants beyond naive): each run's steady state, matched by TIMING_KEY."""
    columns = ["status", "median_ms", "step_times_ms", "tokens_per_s", "mfu", "peak_allocated_bytes",
               "batch_size", "params"]
    parts = []
    for run in (a, b):
        frame = run["timing"]
        if "variant" not in frame:
            frame = frame.assign(variant="naive")
        steady = _steady(frame)
        parts.append(steady[[*TIMING_KEY, *(c for c in columns if c in steady)]])
    joined = _join(parts[0], parts[1], TIMING_KEY)
    rows = []
    for _, row in joined.iterrows():
        out = {k: row[k] for k in TIMING_KEY}
        out["status_a"], out["status_b"] = row.get("status_a"), row.get("status_b")
        for side in ("a", "b"):
            ok = row.get(f"status_{side}") == "ok"
            out[f"median_ms_{side}"] = row.get(f"median_ms_{side}") if ok else math.nan
            out[f"tokens_per_s_{side}"] = row.get(f"tokens_per_s_{side}") if ok else math.nan
            out[f"mfu_{side}"] = row.get(f"mfu_{side}") if ok else math.nan
            peak = row.get(f"peak_allocated_bytes_{side}")
            out[f"peak_gib_{side}"] = peak / 2**30 if ok and pd.notna(peak) else math.nan
            out[f"params_{side}"] = row.get(f"params_{side}")
        unmatched = presence(out["status_a"], out["status_b"])
        if unmatched:
            out.update(_EMPTY_RESULT, verdict=unmatched)
        else:
            result = V.compare_samples(
                _samples(row["step_times_ms_a"]), _samples(row["step_times_ms_b"]), min_effect, alpha
            )
            out.update(_result_columns(result))
        notes = []
        batch_a, batch_b = row.get("batch_size_a"), row.get("batch_size_b")
        if pd.notna(batch_a) and pd.notna(batch_b) and batch_a != batch_b:
            notes.append(f"batch {int(batch_a)} vs {int(batch_b)}")
        if str(out["size"]) in unfair_sizes:
            notes.append("other dimensions")
        out["note"] = "; ".join(notes)
        rows.append(out)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["tokens_ratio"] = frame["tokens_per_s_b"] / frame["tokens_per_s_a"]
    return frame


def _per_step_kernels(run: Run) -> pd.DataFrame:
    kernels = run["kernels"]
    if kernels.empty:
        return kernels
    kernels = kernels[kernels["status"] == "ok"] if "status" in kernels else kernels
    steps = kernels["profiled_steps"] if "profiled_steps" in kernels else 1
    return kernels.assign(ms_per_step=kernels["total_ns"] / steps / 1e6)


def profile_status(run: Run) -> pd.DataFrame:
    """One row per profiled configuration with its status (nsys/runs.csv)."""
    runs = run["profiles"]
    if runs.empty:
        return pd.DataFrame(columns=[*PROFILE_KEY, "status"])
    return runs[[*PROFILE_KEY, "status"]].drop_duplicates(PROFILE_KEY)


def profiled_configurations(a: Run, b: Run) -> pd.DataFrame:
    """Every profiled configuration of either run, with both statuses and a verdict of presence."""
    joined = _join(profile_status(a), profile_status(b), PROFILE_KEY)
    if joined.empty:
        return joined
    joined["presence"] = [presence(x, y) for x, y in zip(joined["status_a"], joined["status_b"], strict=True)]
    return joined


def kernel_categories(a: Run, b: Run) -> pd.DataFrame:
    """GPU time per step by kernel category, per configuration profiled in both runs."""
    sums = []
    for run in (a, b):
        kernels = _per_step_kernels(run)
        if kernels.empty:
            sums.append(pd.DataFrame(columns=[*PROFILE_KEY, "category", "ms_per_step"]))
            continue
        per_category = kernels.groupby([*PROFILE_KEY, "category"], sort=False)["ms_per_step"].sum()
        sums.append(per_category.reset_index())
    configs = profiled_configurations(a, b)
    if configs.empty:
        return pd.DataFrame()
    both = configs[configs["presence"] == ""][PROFILE_KEY]
    joined = _join(sums[0], sums[1], [*PROFILE_KEY, "category"])
    joined = joined.merge(both, on=PROFILE_KEY, how="inner")
    joined["ms_a"] = joined["ms_per_step_a"].fillna(0.0)
    joined["ms_b"] = joined["ms_per_step_b"].fillna(0.0)
    joined["change"] = joined["ms_b"] / joined["ms_a"] - 1
    return joined[[*PROFILE_KEY, "category", "ms_a", "ms_b", "change"]]


def top_kernel_changes(a: Run, b: Run, per_configuration: int = 5) -> pd.DataFrame:
    """Per configuration profiled in both: the kernels that changed most, appeared or vanished."""
    ka, kb = _per_step_kernels(a), _per_step_kernels(b)
    configs = profiled_configurations(a, b)
    if ka.empty or kb.empty or configs.empty:
        return pd.DataFrame()
    both = configs[configs["presence"] == ""][PROFILE_KEY]
    key = [*PROFILE_KEY, "kernel", "category"]
    sa = ka.groupby(key, sort=False)["ms_per_step"].sum().reset_index()
    sb = kb.groupby(key, sort=False)["ms_per_step"].sum().reset_index()
    joined = _join(sa, sb, key).merge(both, on=PROFILE_KEY, how="inner")
    joined["ms_a"] = joined["ms_per_step_a"].fillna(0.0)
    joined["ms_b"] = joined["ms_per_step_b"].fillna(0.0)
    joined["delta_ms"] = joined["ms_b"] - joined["ms_a"]
    joined["change"] = [
        # A kernel that took as long in both (a run compared with itself) changed neither way.
        "appeared" if x == 0 else "disappeared" if y == 0 else
        ("slower" if y > x else "faster" if y < x else "unchanged")
        for x, y in zip(joined["ms_a"], joined["ms_b"], strict=True)
    ]
    joined["magnitude"] = joined["delta_ms"].abs()
    top = (
        joined.sort_values("magnitude", ascending=False, kind="stable")
        .groupby(PROFILE_KEY, sort=False)
        .head(per_configuration)
    )
    order = {tuple(k): i for i, k in enumerate(both.itertuples(index=False, name=None))}
    top = top.assign(_order=[order[tuple(k)] for k in top[PROFILE_KEY].itertuples(index=False, name=None)])
    top = top.sort_values(["_order", "magnitude"], ascending=[True, False], kind="stable")
    columns = [*PROFILE_KEY, "kernel", "category", "change", "ms_a", "ms_b", "delta_ms"]
    return top[columns].reset_index(drop=True)


def memory(a: Run, b: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Section 4: each configuration's peak in both runs, and memory at the peak by kind."""
    joined = _join_table(a, b, "memory", MEMORY_KEY, ["peak_bytes", *(f"{k}_bytes" for k in MEMORY_KINDS)])
    if joined.empty:
        return joined, joined
    peaks = joined[MEMORY_KEY].copy()
    peaks["status_a"], peaks["status_b"] = joined["status_a"], joined["status_b"]
    peaks["presence"] = [presence(x, y) for x, y in zip(joined["status_a"], joined["status_b"], strict=True)]
    for side in ("a", "b"):
        column = f"peak_bytes_{side}"
        values = joined[column] if column in joined else pd.Series(math.nan, index=joined.index)
        peaks[f"peak_gib_{side}"] = (values / 2**30).where(joined[f"status_{side}"] == "ok")
    peaks["ratio"] = peaks["peak_gib_b"] / peaks["peak_gib_a"]
    kinds = []
    both = peaks["presence"] == ""
    for kind in MEMORY_KINDS:
        ca, cb = f"{kind}_bytes_a", f"{kind}_bytes_b"
        if ca not in joined and cb not in joined:
            continue
        part = joined.loc[both, MEMORY_KEY].copy()
        part["kind"] = kind
        part["gib_a"] = (joined.loc[both, ca] if ca in joined else math.nan) / 2**30
        part["gib_b"] = (joined.loc[both, cb] if cb in joined else math.nan) / 2**30
        kinds.append(part)
    kinds = pd.concat(kinds, ignore_index=True) if kinds else pd.DataFrame()
    if not kinds.empty:
        kinds = kinds.sort_values([*MEMORY_KEY], kind="stable").reset_index(drop=True)
        kinds["change_gib"] = kinds["gib_b"] - kinds["gib_a"]
    return peaks, kinds


def _summary(row, prefix: str, side: str, count: str) -> dict:
    return {
        "median": row.get(f"{prefix}median_ms_{side}"),
        "mean": row.get(f"{prefix}mean_ms_{side}"),
        "std": row.get(f"{prefix}std_ms_{side}"),
        "n": row.get(f"{count}_{side}"),
    }


def _summary_comparisons(joined, key, parts, count, min_effect, alpha) -> pd.DataFrame:
    """Rows compared from kept summaries (mean, std, median, count): one per key x part."""
    rows = []
    for _, row in joined.iterrows():
        unmatched = presence(row.get("status_a"), row.get("status_b"))
        for part, prefix in parts:
            out = {k: row[k] for k in key}
            if part:
                out["part"] = part
            out["median_ms_a"] = row.get(f"{prefix}median_ms_a") if row.get("status_a") == "ok" else math.nan
            out["median_ms_b"] = row.get(f"{prefix}median_ms_b") if row.get("status_b") == "ok" else math.nan
            if unmatched:
                out.update(_EMPTY_RESULT, verdict=unmatched)
            else:
                result = V.compare_summaries(
                    _summary(row, prefix, "a", count), _summary(row, prefix, "b", count), min_effect, alpha
                )
                out.update(_result_columns(result))
            rows.append(out)
    return pd.DataFrame(rows)


def attention(a: Run, b: Run, min_effect: float = V.MIN_EFFECT, alpha: float = V.ALPHA) -> pd.DataFrame:
    """Section 5: forward and backward medians per implementation, precision, d and length."""
    stats = [f"{d}_{s}_ms" for d in ("forward", "backward") for s in ("median", "mean", "std")]
    joined = _join_table(a, b, "attention", ATTENTION_KEY, ["steps", *stats])
    if joined.empty:
        return joined
    return _summary_comparisons(
        joined, ATTENTION_KEY, (("forward", "forward_"), ("backward", "backward_")), "steps",
        min_effect, alpha,
    )


def attention_speedups(a: Run, b: Run) -> pd.DataFrame:
    """Each run's speed-up of SDPA and of compiled naive attention over naive eager (forward+backward)."""
    out = None
    for name, run in (("a", a), ("b", b)):
        frame = run["attention"]
        if frame.empty:
            continue
        ok = frame[frame["status"] == "ok"].assign(
            total=lambda f: f["forward_median_ms"] + f["backward_median_ms"]
        )
        wide = ok.pivot_table(index=["precision", "head_dim", "seq_len"], columns="implementation",
                              values="total", aggfunc="first")
        part = pd.DataFrame(index=wide.index)
        for other in ("sdpa", "naive-compile"):
            if "naive" in wide and other in wide:
                part[f"{other}_{name}"] = wide["naive"] / wide[other]
        out = part if out is None else out.join(part, how="outer")
    if out is None or out.empty or not len(out.columns):
        return pd.DataFrame()
    return out.reset_index()


def compile_rows(a: Run, b: Run, min_effect: float = V.MIN_EFFECT, alpha: float = V.ALPHA) -> pd.DataFrame:
    """Section 6: eager and compiled medians per size, precision, attention, pass."""
    keep = ("timed_steps", "median_ms", "mean_ms", "std_ms", "first_step_excess_s")
    joined = _join_table(a, b, "compile", COMPILE_KEY, keep)
    if joined.empty:
        return joined
    rows = _summary_comparisons(joined, COMPILE_KEY, (("", ""),), "timed_steps", min_effect, alpha)
    for side in ("a", "b"):
        column = f"first_step_excess_s_{side}"
        rows[f"compile_s_{side}"] = (
            joined[column].where((joined["mode"] == "compiled") & (joined[f"status_{side}"] == "ok"))
            if column in joined else math.nan
        )
    return rows


def compile_speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """Eager over compiled median, in each run, per size, context, precision, attention and pass."""
    if rows.empty:
        return rows
    key = [k for k in COMPILE_KEY if k != "mode"]
    out = {}
    for side in ("a", "b"):
        wide = rows.pivot_table(index=key, columns="mode", values=f"median_ms_{side}", aggfunc="first",
                                observed=True)
        if {"eager", "compiled"} <= set(wide.columns):
            out[f"speedup_{side}"] = wide["eager"] / wide["compiled"]
        compile_s = rows[rows["mode"] == "compiled"].set_index(key)[f"compile_s_{side}"]
        out[f"compile_s_{side}"] = compile_s
    frame = pd.DataFrame(out)
    return frame.reset_index() if not frame.empty else frame


def ladder_rows(a: Run, b: Run, min_effect: float = V.MIN_EFFECT, alpha: float = V.ALPHA) -> pd.DataFrame:
    """Section 7 (ladder/ladder.csv): each size's rungs, matched by LADDER_KEY, verdicts from the step
    samples; each run's share of its own matmul rate beside them."""
    columns = ["rung", "status", "median_ms", "step_times_ms", "share_of_matmul", "matmul_tflops"]
    parts = [
        run["ladder"][[*LADDER_KEY, *(c for c in columns if c in run["ladder"])]]
        if not run["ladder"].empty else pd.DataFrame(columns=[*LADDER_KEY, "status"])
        for run in (a, b)
    ]
    joined = _join(parts[0], parts[1], LADDER_KEY)
    rows = []
    for _, row in joined.iterrows():
        out = {k: row[k] for k in LADDER_KEY}
        out["rung"] = row.get("rung_a") if pd.notna(row.get("rung_a")) else row.get("rung_b")
        out["status_a"], out["status_b"] = row.get("status_a"), row.get("status_b")
        for side in ("a", "b"):
            ok = row.get(f"status_{side}") == "ok"
            out[f"median_ms_{side}"] = row.get(f"median_ms_{side}") if ok else math.nan
            out[f"share_{side}"] = row.get(f"share_of_matmul_{side}") if ok else math.nan
            out[f"matmul_tflops_{side}"] = row.get(f"matmul_tflops_{side}")
        unmatched = presence(out["status_a"], out["status_b"])
        if unmatched:
            out.update(_EMPTY_RESULT, verdict=unmatched)
        else:
            result = V.compare_samples(
                _samples(row.get("step_times_ms_a")), _samples(row.get("step_times_ms_b")), min_effect, alpha
            )
            out.update(_result_columns(result))
        rows.append(out)
    return pd.DataFrame(rows)


# The ladder's rungs as timing variants, for runs without a ladder table (made before
# section 7 had jobs of its own, or with sdpa variants in timing.variants):
# (rung, precision, timing variant).
RUNGS = (
    ("fp32", "fp32", "naive"),
    ("bf16", "bf16", "naive"),
    ("bf16 + SDPA", "bf16", "sdpa"),
    ("bf16 + SDPA + compile", "bf16", "sdpa-compile"),
)


def ladder(timing_rows: pd.DataFrame) -> pd.DataFrame:
    """The training step's rungs, from the compared timing rows, where a context has more than one rung."""
    if timing_rows.empty:
        return timing_rows
    train = timing_rows[timing_rows["pass"] == "train_step"]
    parts = []
    for index, (rung, precision, variant) in enumerate(RUNGS):
        part = train[(train["precision"] == precision) & (train["variant"] == variant)]
        parts.append(part.assign(rung=rung, rung_index=index))
    rungs = pd.concat(parts, ignore_index=True)
    counts = rungs.groupby(["size", "context_length"])["rung"].transform("nunique")
    rungs = rungs[counts > 1]
    if rungs.empty:
        return rungs
    for side in ("a", "b"):
        base = rungs[rungs["rung_index"] == 0].set_index(["size", "context_length"])[f"median_ms_{side}"]
        keys = list(zip(rungs["size"], rungs["context_length"], strict=True))
        rungs[f"vs_fp32_{side}"] = base.reindex(keys).to_numpy() / rungs[f"median_ms_{side}"]
    seen = dict.fromkeys(zip(timing_rows["size"], timing_rows["context_length"], strict=True))
    first_seen = {k: i for i, k in enumerate(seen)}
    rungs["_order"] = [first_seen[k] for k in zip(rungs["size"], rungs["context_length"], strict=True)]
    rungs = rungs.sort_values(["_order", "rung_index"], kind="stable").drop(columns="_order")
    return rungs.reset_index(drop=True)
