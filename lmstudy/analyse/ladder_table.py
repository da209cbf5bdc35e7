"""The ladder's table: every rung's row beside the dense bf16 matmul ceiling of the GPU it ran on.

The ceiling is the highest burst rate of back-to-back products at steady
clocks (lmstudy.measure.matmul_ceiling). In the workflow each rung job
measures it on its own GPU right after the rung, and its burst rows carry
the job's size and rung_key: a rung's share is of its own GPU's ceiling
(ceilings differ by a few percent from one GPU of a model to the next).
Burst rows without a job key (scripts/bench_ladder.py: one GPU, ceilings
before and after the rungs) give one ceiling for every rung: the highest.
A rung's share is never counted against a rate the GPU showed it could beat.

Torch-free: the workflow's aggregate job (lmstudy.commands.ladder_table) and the
hand-run benchmark (lmstudy.measure.ladder_bench.run_bench) both join here.
"""

from __future__ import annotations

import pandas as pd

from lmstudy import rates

# The burst rows of one ceiling measurement belong to the rung job that measured them.
JOB_KEY = ["size", "rung_key"]
# What lmstudy.measure.matmul_ceiling.SETTLED holds (no torch here): the last window's bursts lie within it.
SETTLED_WITHIN = 0.01
CLOCK_COLUMNS = ("sm_clock_mhz", "min_sm_clock_mhz", "max_sm_clock_mhz", "power_w", "power_limit_w")


def reference_tflops(matmul: pd.DataFrame) -> float:
    """The highest ceiling of the matmul measurements (NaN without any): the sustained rate where the
    bursts ran until it settled, never a short burst's."""
    found = ceilings(matmul)
    return float(found["ceiling_tflops"].max()) if len(found) else float("nan")


def ceilings(matmul: pd.DataFrame) -> pd.DataFrame:
    """One row per ceiling measurement (per rung job, or one for the whole run without job keys).

    Bursts measured until the rate stopped rising (a `kind` column): ceiling_tflops is the median of
    the steady window (_sustained), short_tflops the short bursts' best. Older bursts (a fixed
    number): ceiling_tflops is the highest burst; n: the size it came at; median_tflops and bursts:
    the median and number of bursts at that n; the clocks and power sampled during that n's bursts;
    the GPU's identity where recorded.
    """
    if matmul.empty or "tflops" not in matmul:
        return pd.DataFrame()
    frame = matmul.assign(tflops=pd.to_numeric(matmul["tflops"], errors="coerce")).dropna(subset=["tflops"])
    # "when": the by-hand benchmark measures the ceiling before and after its rungs, each its own.
    keys = [k for k in (*JOB_KEY, "when") if k in frame]
    groups = frame.groupby(keys, sort=False, observed=True) if keys else [((), frame)]
    rows = []
    for key, part in groups:
        if "kind" in part and (part["kind"] == "sustained").any():
            row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
            rows.append({**row, **_sustained(part)})
            continue
        best = part.loc[part["tflops"].idxmax()]
        at_n = part[part["n"] == best["n"]]
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row.update(
            n=int(best["n"]),
            ceiling_tflops=float(best["tflops"]),
            median_tflops=float(at_n["tflops"].median()),
            bursts=len(at_n),
            products=int(best["products"]) if "products" in best else None,
        )
        for column in (*CLOCK_COLUMNS, "gpu", "gpu_uuid"):
            if column in best:
                row[column] = best[column]
        rows.append(row)
    return pd.DataFrame(rows)


def _true(values: pd.Series) -> pd.Series:
    return values.map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))


def _sustained(part: pd.DataFrame) -> dict:
    """One measurement of a rate taken until it stopped rising (matmul_ceiling): the ceiling is the
    median of the steady window at the n that sustains most, the short bursts' best beside it, and the
    clocks read during the steady bursts themselves."""
    sustained = part[part["kind"] == "sustained"]
    steady = sustained[_true(sustained["steady"])] if "steady" in sustained else sustained
    steady = steady if len(steady) else sustained
    by_n = steady.groupby("n")["tflops"].median()
    n = by_n.idxmax()
    at_n, window = sustained[sustained["n"] == n], steady[steady["n"] == n]
    short = part[part["kind"] == "short"]["tflops"]
    row = {
        "n": int(n), "ceiling_tflops": float(by_n.max()), "median_tflops": float(by_n.max()),
        "best_burst_tflops": float(at_n["tflops"].max()), "bursts": len(at_n),
        "window": len(window), "products": int(at_n["products"].iloc[0]) if "products" in at_n else None,
        "settled": bool(_true(at_n["settled"]).all()) if "settled" in at_n else True,
        "first_burst_tflops": float(at_n.sort_values("burst")["tflops"].iloc[0]),
        "short_tflops": float(short.max()) if len(short) else float("nan"),
    }
    for column in CLOCK_COLUMNS:
        if column in window:
            values = pd.to_numeric(window[column], errors="coerce")
            how = {"min_sm_clock_mhz": values.min(), "max_sm_clock_mhz": values.max(),
                   "power_limit_w": values.max()}.get(column, values.mean())
            row[column] = float(how) if pd.notna(how) else None
    for column in ("gpu", "gpu_uuid"):
        if column in window:
            row[column] = window[column].iloc[0]
    return row


def join(rungs: pd.DataFrame, matmul: pd.DataFrame) -> pd.DataFrame:
    """`rungs` with the matmul ceiling of each rung's GPU and the rung's share of it.

    Columns added: matmul_n, matmul_tflops (the ceiling), matmul_median_tflops
    and share_of_matmul (a rung that did not run, OOM or unsupported, has none).
    """
    out = rungs.copy()
    found = ceilings(matmul)
    columns = {"n": "matmul_n", "ceiling_tflops": "matmul_tflops", "median_tflops": "matmul_median_tflops"}
    keys = [k for k in JOB_KEY if k in found and k in out]
    if found.empty:
        for column in columns.values():
            out[column] = float("nan")
    elif keys:
        out = out.merge(found[[*keys, *columns]].rename(columns=columns), on=keys, how="left")
    else:
        best = found.loc[found["ceiling_tflops"].idxmax()]
        for source, column in columns.items():
            out[column] = best[source]
    ok = out["status"] == "ok" if "status" in out else pd.Series(False, index=out.index)
    achieved = pd.to_numeric(out.get("achieved_tflops", pd.Series(float("nan"), index=out.index)))
    out["share_of_matmul"] = rates.share_of_peak(achieved, pd.to_numeric(out["matmul_tflops"])).where(ok)
    return out
