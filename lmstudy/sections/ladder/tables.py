"""Section 7, the optimization ladder of the training step.

The functions that compute its tables (pandas only).
"""

from __future__ import annotations

import pandas as pd

from lmstudy import hardware, rates
from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.ladder_table import ceilings
from lmstudy.analyse.nsys.categories import CATEGORIES
from lmstudy.analyse.trust import gpu_ratio, marks, overlap
from lmstudy.report.labels import mfu_units, on_cpu, order_sizes
from lmstudy.sections import plots

CATEGORY_COLUMNS = {f"gpu_ms_{category}": category for category in CATEGORIES}


def time_words(frame: pd.DataFrame) -> str:
    return "CPU operator time" if on_cpu(frame) else "GPU time"


def ladder_frame(rungs: pd.DataFrame) -> pd.DataFrame:
    """One row per size x rung, in the ladder's order, with its step ratios.

    speedup_vs_previous: the median of the nearest rung below that ran (not
    OOM or unsupported: previous_rung) over this one's; speedup_vs_fp32: the
    fp32 rung's over this one's;
    share_of_matmul as joined (of the matmul ceiling measured on the rung's
    own GPU); mfu over the datasheet dense peak of the precision the rung ran
    in (the report's one MFU definition; peak_tflops and mfu_peak say which),
    where the datasheet table knows the GPU; step_noise, the relative width
    within which the rung's median is not told apart from another's.
    """
    if rungs.empty:
        return pd.DataFrame()
    frame = rungs.copy()
    order = {key: i for i, key in enumerate(dict.fromkeys(frame["rung_key"]))}
    frame["rung_index"] = frame["rung_key"].map(order)
    frame = order_sizes(frame).sort_values(["size", "rung_index"], kind="stable")
    ok = frame["status"] == "ok"
    for column in ("median_ms", "achieved_tflops", "share_of_matmul"):
        # Absent where no rung ran at all (every row OOM or unsupported).
        values = frame[column] if column in frame else pd.Series(float("nan"), index=frame.index)
        frame[column] = pd.to_numeric(values, errors="coerce").where(ok)
    frame["step_noise"] = step_noise(frame)
    ran = frame.assign(
        ran_rung=frame["rung"].where(frame["median_ms"].notna()),
        ran_noise=frame["step_noise"].where(frame["median_ms"].notna()),
    )
    by_size = ran.groupby("size", sort=False, observed=True)
    below_ms = by_size["median_ms"].transform(lambda s: s.ffill().shift(1))
    frame["previous_rung"] = by_size["ran_rung"].transform(lambda s: s.ffill().shift(1))
    # A step from the rung below is told apart from noise only beyond the larger of the two rungs' noises.
    previous_noise = by_size["ran_noise"].transform(lambda s: s.ffill().shift(1))
    frame["step_vs_previous_noise"] = pd.concat([frame["step_noise"], previous_noise], axis=1).max(axis=1)
    frame["speedup_vs_previous"] = below_ms / frame["median_ms"]
    # Told apart from the rung below only where the two intervals do not overlap (where both have one),
    # else beyond the larger of the two rungs' noise (a CV for runs of one process).
    frame["apart_from_previous"] = _apart_from_previous(frame, ran, by_size)
    fp32 = frame[frame["rung_key"] == "fp32"].set_index("size", drop=False)["median_ms"]
    frame["speedup_vs_fp32"] = frame["size"].map(fp32).astype(float) / frame["median_ms"]
    # What the GPU gains rung to rung (its busy time per step), which a host-bound step's wall time hides.
    busy = pd.to_numeric(frame.get("gpu_busy_ms", pd.Series(float("nan"), index=frame.index)),
                         errors="coerce").where(ok)
    frame["gpu_busy_ms"] = busy
    busy_below = ran.assign(busy=busy.where(frame["median_ms"].notna())).groupby(
        "size", sort=False, observed=True)["busy"].transform(lambda s: s.ffill().shift(1))
    frame["gpu_speedup_vs_previous"] = busy_below / busy
    frame["gpu_speedup_vs_fp32"] = frame["size"].map(
        frame[frame["rung_key"] == "fp32"].set_index("size")["gpu_busy_ms"]).astype(float) / busy
    for flag in ("host_bound", "noisy"):
        frame[flag] = frame[flag].fillna(False).astype(bool) if flag in frame else False
    gpus = frame.get("gpu", pd.Series("", index=frame.index)).astype(str)
    frame["mfu_peak"] = mfu_units(frame)
    peaks = [hardware.peak_tflops(g, u if u != "tf32" else "fp32", u == "tf32") for g, u in zip(
        gpus, frame["mfu_peak"], strict=True)]
    frame["peak_tflops"] = pd.to_numeric(pd.Series(peaks, index=frame.index), errors="coerce")
    frame["mfu"] = rates.share_of_peak(frame["achieved_tflops"], frame["peak_tflops"])
    if "reason" not in frame:
        frame["reason"] = None
    return frame.reset_index(drop=True)


def _apart_from_previous(frame: pd.DataFrame, ran: pd.DataFrame, by_size) -> pd.Series:
    nan = pd.Series(float("nan"), index=frame.index)
    low = pd.to_numeric(frame.get("ci_low_ms", nan), errors="coerce").where(frame["median_ms"].notna())
    high = pd.to_numeric(frame.get("ci_high_ms", nan), errors="coerce").where(frame["median_ms"].notna())
    grouped = ran.assign(low=low, high=high).groupby("size", sort=False, observed=True)
    low_below = grouped["low"].transform(lambda s: s.ffill().shift(1))
    high_below = grouped["high"].transform(lambda s: s.ffill().shift(1))
    apart = []
    for i in frame.index:
        ratio = frame.at[i, "speedup_vs_previous"]
        if ratio != ratio:
            apart.append(None)
        elif pd.notna(low[i]) and pd.notna(high[i]) and pd.notna(low_below[i]) and pd.notna(high_below[i]):
            apart.append(not overlap(low[i], high[i], low_below[i], high_below[i]))
        else:
            apart.append(bool(abs(ratio - 1) > frame.at[i, "step_vs_previous_noise"]))
    return pd.Series(apart, index=frame.index, dtype=object)


def step_noise(rungs: pd.DataFrame) -> pd.Series:
    """Each rung's relative noise: half its interval's width over its median where the row has an
    interval (ci_low_ms, ci_high_ms), else its steps' CV. Two rungs whose medians differ by less than
    the larger of their noises are not ranked."""
    nan = pd.Series(float("nan"), index=rungs.index)
    median = pd.to_numeric(rungs.get("median_ms", nan), errors="coerce")
    noise = pd.to_numeric(rungs.get("cv", nan), errors="coerce")
    if {"ci_low_ms", "ci_high_ms"} <= set(rungs.columns):
        width = (pd.to_numeric(rungs["ci_high_ms"]) - pd.to_numeric(rungs["ci_low_ms"])) / 2 / median
        noise = width.where(width.notna(), noise)
    return noise.fillna(0.0)


def within_noise(a, b) -> bool:
    """Whether two rung rows are not told apart: their intervals overlap, or (without intervals) their
    medians are within the larger of their noises (step_noise) of each other."""
    bounds = [r.get(c) for r in (a, b) for c in ("ci_low_ms", "ci_high_ms")]
    if all(pd.notna(v) for v in bounds):
        return overlap(*bounds)
    return abs(a["median_ms"] / b["median_ms"] - 1) <= max(a["step_noise"], b["step_noise"])


def _shown(values: pd.Series, status: pd.Series) -> pd.Series:
    return values.astype(object).where(status == "ok", status)


@computes_table
def ladder_table(ladder: pd.DataFrame) -> pd.DataFrame:
    """Each size's rungs: step time, TFLOP/s, MFU (of its precision's peak, named per row), the share of
    its GPU's measured matmul ceiling, the two speed-ups (a step within noise says so), why not run."""
    below = ladder["speedup_vs_previous"]
    nan = pd.Series(float("nan"), index=ladder.index)
    interval = [f"{lo:.3g}–{hi:.3g}" if pd.notna(lo) and pd.notna(hi) else "" for lo, hi in zip(
        ladder.get("ci_low_ms", nan), ladder.get("ci_high_ms", nan), strict=True)]
    table = pd.DataFrame(
        {
            "size": ladder["size"].astype(str),
            "rung": ladder["rung"],
            "precision": ladder["precision"],
            "median ms": _shown(ladder["median_ms"], ladder["status"]),
            "95% CI ms": interval,
            "GPU busy ms": ladder.get("gpu_busy_ms", nan),
            "TFLOP/s": ladder["achieved_tflops"],
            # Over the datasheet peak of the rung's precision: the table's note names it (mfu_note).
            "MFU %": ladder["mfu"] * 100,
            "share of the measured matmul ceiling %": ladder["share_of_matmul"] * 100,
            "measured ceiling TFLOP/s": ladder.get("matmul_tflops"),
            # over the nearest rung below that ran
            "speed-up vs rung below ×": below,
            "beyond noise": [
                "" if b != b else ("yes" if apart else "no, intervals overlap" if has else "no, within noise")
                for b, apart, has in zip(below, ladder["apart_from_previous"], [i != "" for i in interval],
                                         strict=True)
            ],
            "GPU-time speed-up vs rung below ×": ladder.get("gpu_speedup_vs_previous", nan),
            "speed-up vs fp32 ×": ladder["speedup_vs_fp32"],
            "GPU-time speed-up vs fp32 ×": ladder.get("gpu_speedup_vs_fp32", nan),
            "flags": [marks(r) for _, r in ladder.iterrows()],
            "status": ladder["status"],
            "why not measured": ladder["reason"].where(
            ladder["status"].isin(["unsupported", "not applicable"]), ""
        ),
        }
    )
    if not plots.has_values(table["MFU %"]):
        table = table.drop(columns=["MFU %"])  # a CPU, or a GPU the datasheet table lacks
    if (table["why not measured"] == "").all():
        table = table.drop(columns="why not measured")
    gpu_columns = ("GPU busy ms", "GPU-time speed-up vs rung below ×", "GPU-time speed-up vs fp32 ×")
    empty = [c for c in ("95% CI ms", *gpu_columns) if not table[c].replace("", pd.NA).notna().any()
             or (c in gpu_columns and on_cpu(ladder))]  # on a CPU they hold CPU operator time
    return table.drop(columns=empty).reset_index(drop=True)


def gpu_within_noise(a, b) -> bool:
    """Whether two rung rows' GPU busy times are not told apart: the range their processes allow
    (lmstudy.analyse.trust.gpu_ratio) holds 1."""
    _, low, high = gpu_ratio(a, b)
    return not (pd.notna(low) and (low > 1 or high < 1))


def best_rungs(ladder: pd.DataFrame) -> pd.DataFrame:
    """Per size, the best rung and the measure that ranks it (`ranked_on`).

    Where a rung of the size is host-bound (its wall time measures the host's launches, which move by
    tens of percent between runs) and every rung has a GPU busy time, the rung with the least GPU time
    per step; else the highest achieved TFLOP/s: the fastest step, as every rung does the same work.
    `tied_with`: the other rungs within noise of it on that measure, which it is not ranked above."""
    ok = ladder.dropna(subset=["achieved_tflops"])
    if ok.empty:
        return ok.assign(tied_with=[], ranked_on=[])
    rows = []
    for _, part in ok.groupby("size", sort=False, observed=True):
        busy = pd.to_numeric(part.get("gpu_busy_ms", pd.Series(float("nan"), index=part.index)),
                             errors="coerce")
        on_gpu = bool(part["host_bound"].astype(bool).any()) and busy.notna().all()
        i = busy.idxmin() if on_gpu else part["achieved_tflops"].idxmax()
        best = part.loc[i]
        tie = gpu_within_noise if on_gpu else within_noise
        rows.append(best.copy())
        rows[-1]["tied_with"] = [r["rung"] for j, r in part.iterrows() if j != i and tie(best, r)]
        rows[-1]["ranked_on"] = "GPU time" if on_gpu else "wall time"
    return pd.DataFrame(rows)


@computes_table
def best_table(ladder: pd.DataFrame) -> pd.DataFrame:
    best = best_rungs(ladder)
    return pd.DataFrame(
        {
            "size": best["size"].astype(str),
            "best rung": best["rung"],
            "ranked on": best["ranked_on"],
            "within noise of it": [", ".join(t) for t in best["tied_with"]],
            "median ms": best["median_ms"],
            "TFLOP/s": best["achieved_tflops"],
            "share of the measured matmul ceiling %": best["share_of_matmul"] * 100,
            "speed-up vs fp32 ×": best["speedup_vs_fp32"],
        }
    ).reset_index(drop=True)


@computes_table
def matmul_table(matmul: pd.DataFrame) -> pd.DataFrame:
    """Each ceiling measurement (one per rung job: its GPU): the highest burst, the median burst, the SM
    clock and power sampled during the bursts, and the ceiling as a share of the datasheet's bf16 peak."""
    found = ceilings(matmul)
    if found.empty:
        return found
    datasheet = pd.to_numeric(
        found.get("gpu", pd.Series("", index=found.index)).astype(str).map(
            lambda gpu: hardware.peak_tflops(gpu, "bf16", False)), errors="coerce")
    short_share = rates.share_of_peak(found.get("short_tflops"), datasheet) if "settled" in found else None
    table = pd.DataFrame(
        {
            **{k: found[k].astype(str) for k in ("size", "rung_key") if k in found},
            "GPU": _gpu_names(found),
            "n": found["n"],
            "bursts × products": [
                f"{b} × {p}" for b, p in zip(found["bursts"], found["products"], strict=True)
            ],
            **({
                "first burst TFLOP/s": found["first_burst_tflops"],
                "sustained ceiling TFLOP/s (median of the steady window)": found["ceiling_tflops"],
                "rate stopped rising": found["settled"].map({True: "yes", False: "no: a lower bound"}),
                "short bursts TFLOP/s (best)": found["short_tflops"],
                "short bursts % of the datasheet peak": short_share * 100,
            } if "settled" in found else {
                "ceiling TFLOP/s (highest burst)": found["ceiling_tflops"],
                "median burst TFLOP/s": found["median_tflops"],
            }),
            "% of the datasheet bf16 peak": rates.share_of_peak(found["ceiling_tflops"], datasheet) * 100,
            "SM clock MHz (mean during the bursts)": found.get("sm_clock_mhz"),
            "lowest SM clock MHz": found.get("min_sm_clock_mhz"),
            "max SM clock MHz": found.get("max_sm_clock_mhz"),
            "power W (mean during)": found.get("power_w"),
            "power limit W": found.get("power_limit_w"),
        }
    ).rename(columns={"rung_key": "rung job"})
    keep = ("size", "rung job", "GPU", "n", "bursts × products", "rate stopped rising")
    empty = [c for c in table.columns if c not in keep and not plots.has_values(table[c])]
    return table.drop(columns=empty).reset_index(drop=True)


def _gpu_names(found: pd.DataFrame) -> pd.Series:
    """The GPU each ceiling was measured on: its leased UUID, else its name."""
    name = found.get("gpu", pd.Series("", index=found.index)).fillna("").astype(str)
    uuid = found.get("gpu_uuid", pd.Series("", index=found.index)).fillna("").astype(str)
    return uuid.where(uuid != "", name)


def breakdown_frame(ladder: pd.DataFrame) -> pd.DataFrame:
    """The measured rungs that were profiled: ms per step by category, busy, and the step's rest."""
    if "gpu_busy_ms" not in ladder:
        return pd.DataFrame()
    rows = ladder[(ladder["status"] == "ok") & ladder["gpu_busy_ms"].notna()].copy()
    for column in CATEGORY_COLUMNS:
        rows[column] = pd.to_numeric(rows[column], errors="coerce").fillna(0.0) if column in rows else 0.0
    # The profiled steps are not the timed ones, and run under the profiler: their busy time can
    # exceed the timed median. Then the rest is unknown (n/a), not zero.
    rest = rows["median_ms"] - rows["gpu_busy_ms"]
    rows["not_busy_ms"] = rest.where(rest >= 0)
    return rows


@computes_table
def breakdown_table(rows: pd.DataFrame, words: str) -> pd.DataFrame:
    """Per rung: the step's median, the category times per step and their sum (columns all zero left out)."""
    table = pd.DataFrame(
        {"size": rows["size"].astype(str), "rung": rows["rung"], "step ms": rows["median_ms"]}
    )
    for column, category in CATEGORY_COLUMNS.items():
        if (rows[column] > 0).any():
            table[f"{category} ms"] = rows[column]
    table[f"{words}, all ms"] = rows["gpu_busy_ms"]
    table["rest of the step ms"] = rows["not_busy_ms"]
    return table.reset_index(drop=True)
