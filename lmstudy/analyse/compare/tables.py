"""Each section's numbers of two runs matched by configuration: the joins, presence and verdicts
every section's comparison (lmstudy/sections/<name>/compare.py) uses.

A section builds its rows with each side's three measures (`measures`: the
steps of every process, the GPU's busy time of every process, kernels per
step) and hands them to `judge`, which gives each row a verdict per measure,
the host-bound and noisy flags of each side, and a one-line reading. The
wall-time interval of a row borrows strength from the rows of its regime
(host-bound or not, in both runs: lmstudy.analyse.stats.pooled_intervals)
where they give enough degrees of freedom.

A joined frame has one row per configuration found in either run, so a
configuration measured in one run only, or out of memory in one, is a row
that says so rather than a row dropped.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from lmstudy.analyse import stats
from lmstudy.analyse.compare import verdict as V
from lmstudy.analyse.compare.compiled import compiled_once
from lmstudy.analyse.compare.runs import Run

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


def join(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Outer join of A's and B's rows on `key` (columns suffixed _a, _b); A's order, then B's extra rows."""
    a = a.assign(_in_a=True).set_index(key)
    b = b.assign(_in_b=True).set_index(key)
    joined = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer", sort=False)
    order = list(a.index) + [k for k in b.index if k not in set(a.index)]
    return joined.reindex(order).reset_index()


def join_table(a: Run, b: Run, table: str, key: list[str], columns) -> pd.DataFrame:
    """Both runs' `table` (those of `columns` it has, and status), joined on `key` (see join)."""
    parts = []
    for run in (a, b):
        frame = run[table]
        if frame.empty:
            parts.append(pd.DataFrame(columns=[*key, "status"]))
        else:
            parts.append(frame[[c for c in (*key, "status", *columns) if c in frame]])
    return join(parts[0], parts[1], key)


# Each side's GPU columns, where the run has them (a run made before they were recorded lacks them;
# a CPU run leaves them empty): the GPU's busy time per step and kernels launched per step, as the
# row's median and one per process.
GPU_COLUMNS = ("gpu_busy_ms", "gpu_busy_ms_processes", "kernels_per_step", "kernels_per_step_processes")

# Rows of a regime needed to estimate the scatter between jobs (_between_jobs).
MIN_BETWEEN_ROWS = 6
EMPTY_RESULT = {
    "ratio": math.nan, "ci_low": math.nan, "ci_high": math.nan, "processes_a": 0, "processes_b": 0,
}


def _numbers(cell) -> list[float]:
    """A JSON list of numbers (one per process) as positive floats; [] for anything else."""
    if isinstance(cell, str):
        try:
            cell = json.loads(cell)
        except ValueError:
            return []
    if not isinstance(cell, list):
        return []
    return [float(x) for x in cell if isinstance(x, int | float) and not isinstance(x, bool)
            and math.isfinite(x) and x > 0]


def measures(row, side: str, samples: str, prefix: str = "") -> dict:
    """One side ("a" or "b") of a joined row as `judge` reads it.

    `samples`: the column of its step samples (a JSON list per process); `prefix`: what the GPU
    columns' names start with (attention's "forward_"). The GPU's busy time is the per-process list
    (gpu_busy_ms_processes) where the run kept one, else the row's single gpu_busy_ms (a run made
    before every process recorded it: one process's value); kernels per step likewise.
    """
    ok = row.get(f"status_{side}") == "ok"
    gpu = _numbers(row.get(f"{prefix}gpu_busy_ms_processes_{side}")) or _numbers(
        [row.get(f"{prefix}gpu_busy_ms_{side}")])
    kernels = row.get(f"{prefix}kernels_per_step_{side}")
    if pd.isna(kernels):
        counts = _numbers(row.get(f"{prefix}kernels_per_step_processes_{side}"))
        kernels = float(np.median(counts)) if counts else math.nan
    return {
        f"steps_{side}": V.processes_of(row.get(f"{samples}_{side}")) if ok else [],
        f"gpu_processes_{side}": gpu if ok else [],
        f"kernels_{side}": float(kernels) if ok and pd.notna(kernels) else math.nan,
    }


def _padded(lists: list[list[float]]) -> np.ndarray:
    """Rows of logs of different lengths as one array, NaN-padded."""
    width = max([len(x) for x in lists] + [1])
    out = np.full((len(lists), width), np.nan)
    for i, values in enumerate(lists):
        out[i, :len(values)] = np.log(values)
    return out


def _pooled(logs_a: list[list[float]], logs_b: list[list[float]]):
    """The pooled (centre, half-width) of every row, or None where the pool is too small."""
    freedom = sum(max(len(x) - 1, 0) for x in (*logs_a, *logs_b))
    if freedom < V.MIN_POOLED_FREEDOM:
        return None
    return stats.pooled_intervals(_padded(logs_a), _padded(logs_b), V.POOLED_CONFIDENCE)


def _between_jobs(centres, confidence: float = V.POOLED_CONFIDENCE) -> float:
    """The least half-width of a wall-time log-interval in one regime: the scatter of its rows' changes.

    Each side of a row is one job, whose processes ran back to back: a drift of the machine between
    jobs (a load that comes and goes) moves all of one side's processes together, and no spread
    between them shows it. The rows of a regime scatter around their common change by that drift;
    their standard deviation (of the log-ratios) at the interval's quantile is a floor no row's
    interval goes below. A real change that moves every row alike (a larger batch) leaves the
    scatter small; one that moves rows unevenly widens it, erring towards "undecided". With fewer
    than MIN_BETWEEN_ROWS rows the scatter is not estimated (0). Measured on simulated A/A
    comparisons of 18 rows whose jobs drift (tests/test_compare_runs.py): 0.6% of rows called at a
    drift of 10% a job, 1.3% at 35%, and no comparison above 10%, where the median absolute
    deviation let 5 and 7 of 40 comparisons call more than 10%.
    """
    from scipy.stats import norm

    values = np.asarray([c for c in centres if math.isfinite(c)], float)
    if len(values) < MIN_BETWEEN_ROWS:
        return 0.0
    return float(norm.ppf(0.5 + confidence / 2)) * float(np.std(values, ddof=1))


def _flags(medians: list[float], gpu: list[float], median_ms: float, noise: V.Noise) -> tuple[bool, bool]:
    """(host-bound, noisy) of one side, as the study's tables flag them (lmstudy.analyse.trust)."""
    busy = float(np.median(gpu)) if gpu else math.nan
    host = bool(math.isfinite(busy) and median_ms > 0 and busy / median_ms < noise.min_gpu_busy)
    noisy = bool(len(medians) > 1 and max(medians) / min(medians) - 1 > noise.max_spread)
    return host, noisy


def judge(rows: pd.DataFrame, min_effect: float, noise: V.Noise | None = None,
          confidence: float = V.CONFIDENCE) -> pd.DataFrame:
    """`rows` (a `presence` column, median_ms_a/_b and each side's `measures`) with every verdict:
    wall time's against the band `min_effect`, GPU time's against `noise.gpu_min_effect`.

    Adds: wall time's ratio, ci_low, ci_high, verdict, processes_a/_b and `pooled` (whether its
    interval borrowed from its regime's rows); the GPU's gpu_ms_a/_b, gpu_ratio, gpu_ci_low,
    gpu_ci_high, gpu_verdict; kernels_verdict; host_bound_a/_b, noisy_a/_b; reading.
    """
    rows = rows.reset_index(drop=True).copy()
    if rows.empty:
        return rows
    noise = noise or V.noise_of_study()
    medians = {side: [[float(np.median(p)) for p in steps] for steps in rows[f"steps_{side}"]]
               for side in ("a", "b")}
    gpu = {side: list(rows[f"gpu_processes_{side}"]) for side in ("a", "b")}
    for side in ("a", "b"):
        _add_side_flags(rows, side, medians[side], gpu[side], noise)
    matched = rows["presence"].fillna("") == ""
    wall, gpu_interval = _intervals(rows, matched, medians, gpu, noise)
    rows["compiled_once"] = compiled_once(rows)
    compiled_floor = V.agreement_half_width(noise.compiled_agreement, 1, 1)
    _widen_compiled(rows, gpu_interval, compiled_floor)
    out = []
    for i, row in rows.iterrows():
        result = dict(EMPTY_RESULT, verdict=row["presence"], pooled=False, gpu_ratio=math.nan,
                      gpu_ci_low=math.nan, gpu_ci_high=math.nan, gpu_verdict=V.TOO_FEW,
                      kernels_verdict=V.TOO_FEW)
        if matched[i]:
            result.update(_wall(row, wall[i], min_effect, confidence,
                                compiled_floor if row["compiled_once"] else 0.0))
            result.update(_gpu(row, gpu_interval[i], noise))
            result["kernels_verdict"] = V.kernels_verdict(row.get("kernels_a"), row.get("kernels_b"))
        result["reading"] = V.reading(
            result["verdict"], result["gpu_verdict"], result["kernels_verdict"],
            bool(row["host_bound_a"] or row["host_bound_b"]), bool(row["noisy_a"] or row["noisy_b"]),
            bool(row["compiled_once"]))
        out.append(result)
    return pd.concat([rows, pd.DataFrame(out, index=rows.index)], axis=1)


def _add_side_flags(rows: pd.DataFrame, side: str, medians: list, gpu: list, noise: V.Noise) -> None:
    """Columns host_bound_<side>, noisy_<side> and gpu_ms_<side> (the median of its processes' GPU times)."""
    nan = math.nan
    flags = [_flags(m, g, x if pd.notna(x) else nan, noise)
             for m, g, x in zip(medians, gpu, rows[f"median_ms_{side}"], strict=True)]
    rows[f"host_bound_{side}"] = [f[0] for f in flags]
    rows[f"noisy_{side}"] = [f[1] for f in flags]
    rows[f"gpu_ms_{side}"] = [float(np.median(g)) if g else nan for g in gpu]


def _intervals(rows: pd.DataFrame, matched: pd.Series, medians: dict, gpu: dict, noise: V.Noise
               ) -> tuple[dict, dict]:
    """Each matched row's log-ratio interval (centre, half width) of wall time and of GPU time, pooled
    over the rows of its regime (host-bound or not); None where it has none."""
    regime = rows["host_bound_a"] | rows["host_bound_b"]
    wall = {i: None for i in rows.index}
    gpu_interval = {i: None for i in rows.index}
    for host in (False, True):
        members = list(rows.index[matched & (regime == host)])
        if not members:
            continue
        pooled = _pooled([medians["a"][i] for i in members], [medians["b"][i] for i in members])
        if pooled is not None:
            floor = _between_jobs(pooled[0])
            for j, i in enumerate(members):
                wall[i] = (pooled[0][j], max(pooled[1][j], floor))
        with_gpu = [i for i in members if gpu["a"][i] and gpu["b"][i]]
        pooled = _pooled([gpu["a"][i] for i in with_gpu], [gpu["b"][i] for i in with_gpu])
        for j, i in enumerate(with_gpu):
            if pooled is not None and math.isfinite(pooled[1][j]):
                gpu_interval[i] = (pooled[0][j], pooled[1][j])
            else:
                centre = float(np.mean(np.log(gpu["b"][i])) - np.mean(np.log(gpu["a"][i])))
                gpu_interval[i] = (centre, V.agreement_half_width(noise.gpu_agreement, len(gpu["a"][i]),
                                                                  len(gpu["b"][i])))
    return wall, gpu_interval


def _widen_compiled(rows: pd.DataFrame, gpu_interval: dict, floor: float) -> None:
    """A row measured from one compilation a run: its GPU interval at least `floor` (the log half
    width two compilations agree within, compare.compiled_agreement) either side, whatever its
    processes, which share the compilation, say. Wall time's: `_wall`."""
    for i in rows.index[rows["compiled_once"]]:
        if gpu_interval[i] is not None:
            gpu_interval[i] = (gpu_interval[i][0], max(gpu_interval[i][1], floor))


def _gpu(row, interval: tuple[float, float] | None, noise: V.Noise) -> dict:
    """GPU time's ratio, interval and verdict of one matched row; nothing where it has no interval."""
    if interval is None:
        return {}
    centre, half = interval
    low, high = math.exp(centre - half), math.exp(centre + half)
    return dict(gpu_ratio=row["gpu_ms_b"] / row["gpu_ms_a"], gpu_ci_low=low, gpu_ci_high=high,
                gpu_verdict=V.decide(low, high, noise.gpu_min_effect))


def _wall(row, pooled, min_effect: float, confidence: float, floor: float = 0.0) -> dict:
    """Wall time's comparison of one matched row: the bootstrap, widened to the pooled interval
    where its regime gave one, else to Welch's (lmstudy.analyse.stats.ratio_interval), and to `floor`
    (a log half width) either side of the ratio: a compiled row's agreement between compilations."""
    a, b = row["steps_a"], row["steps_b"]
    if not a or not b:
        ratio = row["median_ms_b"] / row["median_ms_a"] if row["median_ms_a"] > 0 and row["median_ms_b"] > 0 \
            else math.nan
        return dict(EMPTY_RESULT, processes_a=len(a), processes_b=len(b), ratio=ratio,
                    verdict=V.ONE_PROCESS if math.isfinite(ratio) else V.TOO_FEW)
    use_pool = pooled is not None and math.isfinite(pooled[1]) and min(len(a), len(b)) > 1
    ratio, low, high = stats.ratio_interval(a, b, confidence, welch=not use_pool)
    if use_pool:
        low, high = min(low, math.exp(pooled[0] - pooled[1])), max(high, math.exp(pooled[0] + pooled[1]))
    low, high = min(low, ratio * math.exp(-floor)), max(high, ratio * math.exp(floor))
    verdict = V.ONE_PROCESS if min(len(a), len(b)) < 2 else V.decide(low, high, min_effect)
    return {"ratio": ratio, "ci_low": low, "ci_high": high, "verdict": verdict, "processes_a": len(a),
            "processes_b": len(b), "pooled": use_pool}


def sample_comparisons(joined, key, parts, min_effect, noise: V.Noise | None = None) -> pd.DataFrame:
    """Rows compared from their per-process samples: one per key x part, judged (`judge`).

    `parts`: (part's name, its median column, its per-process samples
    column, the prefix of its GPU columns). A row whose samples were
    not kept (a run made before they were) shows the ratio of medians with
    the verdict "one process".
    """
    rows = []
    for _, row in joined.iterrows():
        for part, median, samples, prefix in parts:
            out = {k: row[k] for k in key}
            if part:
                out["part"] = part
            out["status_a"], out["status_b"] = row.get("status_a"), row.get("status_b")
            out["presence"] = presence(row.get("status_a"), row.get("status_b"))
            out["median_ms_a"] = row.get(f"{median}_a") if row.get("status_a") == "ok" else math.nan
            out["median_ms_b"] = row.get(f"{median}_b") if row.get("status_b") == "ok" else math.nan
            for side in ("a", "b"):
                out.update(measures(row, side, samples, prefix))
            rows.append(out)
    return judge(pd.DataFrame(rows), min_effect, noise)
