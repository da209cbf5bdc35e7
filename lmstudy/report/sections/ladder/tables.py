"""Section 7, the optimization ladder of the training step.

The functions that compute its tables (pandas only).
"""

from __future__ import annotations

import pandas as pd

from lmstudy import hardware
from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.nsys.categories import CATEGORIES
from lmstudy.report.sections import plots
from lmstudy.report.sections.labels import order_sizes

CATEGORY_COLUMNS = {f"gpu_ms_{category}": category for category in CATEGORIES}


def on_cpu(frame: pd.DataFrame) -> bool:
    """Whether the run measured on a CPU (its gpu column says cpu (...)): kernels are operators there."""
    gpus = frame.get("gpu", pd.Series(dtype=object)).dropna().astype(str)
    return bool(len(gpus)) and gpus.str.startswith("cpu").all()


def time_words(frame: pd.DataFrame) -> str:
    return "CPU operator time" if on_cpu(frame) else "GPU time"


def ladder_frame(rungs: pd.DataFrame) -> pd.DataFrame:
    """One row per size x rung, in the ladder's order, with its step ratios.

    speedup_vs_previous: the median of the nearest rung below that ran (not
    OOM or unsupported: previous_rung) over this one's; speedup_vs_fp32: the
    fp32 rung's over this one's;
    share_of_matmul as joined; mfu_bf16 over the GPU's dense bf16 peak,
    where the datasheet table knows the GPU.
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
    ran = frame.assign(ran_rung=frame["rung"].where(frame["median_ms"].notna()))
    by_size = ran.groupby("size", sort=False, observed=True)
    below_ms = by_size["median_ms"].transform(lambda s: s.ffill().shift(1))
    frame["previous_rung"] = by_size["ran_rung"].transform(lambda s: s.ffill().shift(1))
    frame["speedup_vs_previous"] = below_ms / frame["median_ms"]
    fp32 = frame[frame["rung_key"] == "fp32"].set_index("size", drop=False)["median_ms"]
    frame["speedup_vs_fp32"] = frame["size"].map(fp32).astype(float) / frame["median_ms"]
    peaks = frame.get("gpu", pd.Series("", index=frame.index)).astype(str).map(
        lambda gpu: hardware.peak_tflops(gpu, "bf16", False)
    )
    frame["mfu_bf16"] = frame["achieved_tflops"] / pd.to_numeric(peaks, errors="coerce")
    if "reason" not in frame:
        frame["reason"] = None
    return frame.reset_index(drop=True)


def _shown(values: pd.Series, status: pd.Series) -> pd.Series:
    return values.astype(object).where(status == "ok", status)


@computes_table
def ladder_table(ladder: pd.DataFrame) -> pd.DataFrame:
    """Each size's rungs: step time, TFLOP/s, share of the matmul rate, the two speed-ups, why not run."""
    table = pd.DataFrame(
        {
            "size": ladder["size"].astype(str),
            "rung": ladder["rung"],
            "median ms": _shown(ladder["median_ms"], ladder["status"]),
            "TFLOP/s": ladder["achieved_tflops"],
            "share of matmul %": ladder["share_of_matmul"] * 100,
            # over the nearest rung below that ran
            "speed-up vs rung below ×": ladder["speedup_vs_previous"],
            "speed-up vs fp32 ×": ladder["speedup_vs_fp32"],
            "MFU (% of bf16 peak)": ladder["mfu_bf16"] * 100,
            "status": ladder["status"],
            "why not measured": ladder["reason"].where(ladder["status"] == "unsupported", ""),
        }
    )
    if not plots.has_values(table["MFU (% of bf16 peak)"]):
        table = table.drop(columns="MFU (% of bf16 peak)")  # a CPU, or a GPU the datasheet table lacks
    if (table["why not measured"] == "").all():
        table = table.drop(columns="why not measured")
    return table.reset_index(drop=True)


def best_rungs(ladder: pd.DataFrame) -> pd.DataFrame:
    """Per size, the rung with the highest achieved TFLOP/s: the fastest step, as every rung does the same
    work."""
    ok = ladder.dropna(subset=["achieved_tflops"])
    if ok.empty:
        return ok
    return ok.loc[ok.groupby("size", sort=False, observed=True)["achieved_tflops"].idxmax()]


@computes_table
def best_table(ladder: pd.DataFrame) -> pd.DataFrame:
    best = best_rungs(ladder)
    return pd.DataFrame(
        {
            "size": best["size"].astype(str),
            "best rung": best["rung"],
            "median ms": best["median_ms"],
            "TFLOP/s": best["achieved_tflops"],
            "share of matmul %": best["share_of_matmul"] * 100,
            "speed-up vs fp32 ×": best["speedup_vs_fp32"],
        }
    ).reset_index(drop=True)


@computes_table
def matmul_table(matmul: pd.DataFrame) -> pd.DataFrame:
    """The matmul runs: rate, and the SM clock and power nvidia-smi read after each (left out where none)."""
    reference = pd.to_numeric(matmul["tflops"]).max()
    table = pd.DataFrame(
        {
            "run": matmul["kind"],
            "n": matmul["n"],
            "products": matmul["repeats"],
            "median ms": matmul["median_ms"],
            "TFLOP/s": matmul["tflops"],
            "SM clock MHz": matmul.get("sm_clock_mhz"),
            "max SM clock MHz": matmul.get("max_sm_clock_mhz"),
            "power W": matmul.get("power_w"),
            "the reference": ["yes" if rate == reference else "" for rate in matmul["tflops"]],
        }
    )
    empty = [c for c in ("SM clock MHz", "max SM clock MHz", "power W") if not plots.has_values(table[c])]
    return table.drop(columns=empty).reset_index(drop=True)


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
