"""One configuration, several sections: the eager step torch.compile is compared with, as each section
measured it (pandas only).

The compile section's eager training step (small, ctx 256, bf16, naive attention, batch 4) is also
section 1's timing cell and section 7's bf16 rung. Each is the median over its own job's fresh
processes, and its interval holds for the variation between those processes, not between jobs: on
a host-bound step the host's load moves from one job to the next. So the speed-up is stated against
every eager measurement of the configuration, with an interval that covers them all, and where they
disagree beyond their intervals the report says so and by how much.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.tables import steady_rows
from lmstudy.analyse.trust import gpu_ratio, overlap
from lmstudy.registry import reference
from lmstudy.report.labels import on_cpu

# The sections that measure an eager configuration, as a reader finds them in the report.
HERE = f"{reference('compile')} (this table)"
TIMING = f"{reference('timing')} (timing)"
LADDER = f"{reference('ladder')} (ladder rung {{rung}})"
KEY = ["size", "context_length", "batch_size", "precision", "attention", "pass"]
MEASURED = ["median_ms", "ci_low_ms", "ci_high_ms", "processes", "gpu_busy_ms", "gpu_busy_ms_processes",
            "gpu_index", "gpu_uuid"]


def _pick(rows: pd.DataFrame, source: str) -> pd.DataFrame:
    rows = rows.copy()
    for column in MEASURED:
        if column not in rows:
            rows[column] = float("nan")
    rows["source"] = source
    return rows[[*KEY, "source", *MEASURED]]


def eager_measurements(compile_rows: pd.DataFrame, timing: pd.DataFrame,
                       ladder: pd.DataFrame) -> pd.DataFrame:
    """Every measurement of each configuration the compile section ran eager: its own row, the timing
    section's steady row of the naive model and the ladder's rung of the same precision and attention
    without compile (fp32, bf16). One row per (configuration, section)."""
    eager = compile_rows[(compile_rows["mode"] == "eager") & (compile_rows["status"] == "ok")]
    if eager.empty or not set(KEY) <= set(eager):
        return pd.DataFrame()
    found = [_pick(eager, HERE)]
    keys = eager[KEY].drop_duplicates()
    if not timing.empty and {"warmup_steps", "variant"} <= set(timing):
        steady = steady_rows(timing)
        steady = steady[(steady["status"] == "ok") & (steady["variant"] == "naive")].assign(attention="naive")
        if "batch_size" in steady:
            found.append(_pick(steady.astype({"pass": str}).merge(keys, on=KEY), TIMING))
    if not ladder.empty and {"rung_key", "attention"} <= set(ladder):
        plain = ladder[(ladder["status"] == "ok") & (ladder["rung_key"] == ladder["precision"])]
        if "compile_mode" in plain:
            plain = plain[plain["compile_mode"].fillna("").astype(str).isin(["", "none", "None"])]
        plain = plain.assign(**{"pass": "train_step"})
        if on_cpu(plain):  # what the ladder's profile reads on a CPU is its operators' time, not a GPU's
            plain = plain.assign(gpu_busy_ms=float("nan"))
        for rung, part in plain.groupby("rung_key", sort=False):
            found.append(_pick(part.merge(keys, on=KEY), LADDER.format(rung=rung)))
    out = pd.concat([f for f in found if len(f)], ignore_index=True)
    out["size"] = out["size"].astype(str)
    return out


def _busy(row) -> float:
    return float(pd.to_numeric(pd.Series([row.get("gpu_busy_ms")]), errors="coerce").iloc[0])


def story(measurements: pd.DataFrame, compiled: pd.DataFrame) -> pd.DataFrame:
    """Per configuration measured eager in more than one section: how far the eager measurements agree,
    and the compile speed-up against each.

    Columns: sources, eager medians' lowest and highest (min_ms, max_ms) and their ratio, whether two
    of their intervals do not overlap (disagree), the speed-up against the lowest and highest eager
    median, the interval covering every eager measurement (covering_low/high: the lowest eager bound
    over the compiled upper bound, and so on), the break-even steps against each end (break_even_from:
    the measure whose gain they rest on, wall time, GPU time or none where neither tells them apart)."""
    if measurements.empty:
        return pd.DataFrame()
    compiled = compiled[(compiled["mode"] == "compiled") & (compiled["status"] == "ok")].copy()
    compiled["size"] = compiled["size"].astype(str)
    records = []
    for key, part in measurements.groupby(KEY, sort=False, observed=True):
        mine = compiled.merge(pd.DataFrame([dict(zip(KEY, key, strict=True))]), on=KEY)
        if mine.empty or len(part) < 2:
            continue
        c = mine.iloc[0]
        pairs = [(a, b) for i, a in part.iterrows() for j, b in part.iterrows() if i < j]
        disagree = any(not overlap(a["ci_low_ms"], a["ci_high_ms"], b["ci_low_ms"], b["ci_high_ms"])
                       and pd.notna(a["ci_low_ms"]) and pd.notna(b["ci_low_ms"]) for a, b in pairs)
        low, high = part["median_ms"].min(), part["median_ms"].max()
        compile_s = pd.to_numeric(pd.Series([c.get("first_step_excess_s")]), errors="coerce").iloc[0]
        record = {
            **dict(zip(KEY, key, strict=True)), "sources": len(part), "min_ms": low, "max_ms": high,
            "max_over_min": high / low, "disagree": disagree, "compiled_ms": c["median_ms"],
            "speedup_min": low / c["median_ms"], "speedup_max": high / c["median_ms"],
            "covering_low": part["ci_low_ms"].min() / c.get("ci_high_ms", float("nan")),
            "covering_high": part["ci_high_ms"].max() / c.get("ci_low_ms", float("nan")),
            "compile_s": compile_s,
        }
        here = part[part["source"] == HERE].iloc[0]
        ratio, g_low, g_high = gpu_ratio(here, c)
        record.update(gpu_speedup=ratio, gpu_speedup_low=g_low, gpu_speedup_high=g_high)
        # The break-even from the gain a measure decides: wall time's where the interval covering
        # every eager measurement excludes 1, else GPU time's where its processes tell the two apart.
        told = not record["covering_low"] <= 1 <= record["covering_high"]
        gpu_told = pd.notna(g_low) and g_low > 1
        saved_gpu = _busy(here) - _busy(c)
        for end, eager_ms in (("min", high), ("max", low)):  # the most saved, the least
            saved = (eager_ms - c["median_ms"]) if told else saved_gpu if gpu_told else float("nan")
            record[f"break_even_{end}"] = compile_s * 1e3 / saved if saved > 0 else float("nan")
        record["break_even_from"] = "wall time" if told else "GPU time" if gpu_told else "not told apart"
        records.append(record)
    return pd.DataFrame(records)
