"""Section 7, the optimization ladder of the training step.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy import hardware
from lmstudy.analyse.ladder_table import ceilings
from lmstudy.report.contract import wording
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.report.labels import faster
from lmstudy.sections.ladder.tables import (
    CATEGORY_COLUMNS,
    best_rungs,
    breakdown_frame,
    on_cpu,
    time_words,
    within_noise,
)

# A rung of one size: the key of the rows behind a finding.
KEY = ("size", "rung_key", "rung")


_say = wording(__name__)


def findings(ladder: pd.DataFrame, matmul: pd.DataFrame | None = None) -> list[Finding]:
    """Sentences computed from the ladder: the measured ceiling against the datasheet, best rung (or the
    rungs tied with it within noise) with its MFU and share, biggest step beyond noise, where the best
    rung's time goes, and which rungs could not run and why."""
    return gather(
        _ceiling(matmul) if matmul is not None else [],
        _best(ladder),
        _steps(ladder),
        _breakdown(ladder),
        _unsupported(ladder),
        _oom(ladder),
    )


def _host(best) -> dict:
    """A host-bound size's best rung as GPU time ranks it: its busy time, its GPU speed-up over fp32's
    (none for fp32 itself or where unmeasured) and its wall step's interval (none without one)."""
    ratio = best.get("gpu_speedup_vs_fp32")
    low, high = best.get("ci_low_ms"), best.get("ci_high_ms")
    return {
        "ms": best["gpu_busy_ms"],
        "faster": faster(ratio) if pd.notna(ratio) and best["rung_key"] != "fp32" else None,
        "interval": (low, high) if pd.notna(low) and pd.notna(high) else None,
    }


def _share(ladder: pd.DataFrame, best) -> dict | None:
    """The best rung's share of the matmul ceiling measured on its device; None where unmeasured."""
    if not pd.notna(best["share_of_matmul"]):
        return None
    device = "CPU" if on_cpu(ladder[ladder["size"] == best["size"]]) else "GPU"
    # A step cannot outrun the device's dense matmul rate: above 100%, the ceiling was measured low.
    return {
        "percent": best["share_of_matmul"] * 100,
        "device": device,
        "tflops": best["matmul_tflops"],
        "over": best["share_of_matmul"] > 1,
    }


def _against_fp32(ladder: pd.DataFrame, best, on_gpu: bool) -> dict | None:
    """The best rung's wall-time ratio to fp32's, undecided where the two are within noise (a wall-time
    speed-up is stated only where the intervals tell them apart); None for fp32 itself."""
    if not pd.notna(best["speedup_vs_fp32"]) or best["rung_key"] == "fp32":
        return None
    fp32 = ladder[(ladder["size"] == best["size"]) & (ladder["rung_key"] == "fp32")]
    undecided = _why(ladder) if len(fp32) and within_noise(best, fp32.iloc[0]) else None
    ratio = best["speedup_vs_fp32"]
    return {"ratio": ratio, "faster": faster(ratio), "undecided": undecided, "wall": on_gpu}


@finds
def _best(ladder: pd.DataFrame) -> list[Finding]:
    """Per size, the best rung: its row first, then the rungs within noise of it (`best` says which)."""
    items = []
    for _, best in best_rungs(ladder).iterrows():
        # Host-bound rungs: wall time measures the host, so the GPU's busy time ranks them.
        on_gpu = best["ranked_on"] == "GPU time"
        mfu = (
            {
                "percent": best["mfu"] * 100,
                "peak": hardware.PEAK_NAMES[best["mfu_peak"]],
                "tflops": best["peak_tflops"],
            }
            if pd.notna(best.get("mfu"))
            else None
        )
        text = _say(
            "best",
            size=best["size"],
            rung=best["rung"],
            median=best["median_ms"],
            tflops=best["achieved_tflops"],
            host=_host(best) if on_gpu else None,
            mfu=mfu,
            share=_share(ladder, best),
            fp32=_against_fp32(ladder, best, on_gpu),
            tied=best["tied_with"],
            why_tied="gpu" if on_gpu else _why(ladder),
        )
        size = ladder[ladder["size"] == best["size"]]
        tied = size[size["rung"].isin(best["tied_with"]) & (size.index != best.name)]
        behind = pd.concat([ladder.loc[[best.name]], tied]).assign(best=[True] + [False] * len(tied))
        items.append(
            Finding(
                text,
                rows_behind(
                    behind,
                    "best",
                    "median_ms",
                    "step_noise",
                    "achieved_tflops",
                    "mfu",
                    "mfu_peak",
                    "peak_tflops",
                    "share_of_matmul",
                    "matmul_tflops",
                    "speedup_vs_fp32",
                    "gpu_busy_ms",
                    "gpu_speedup_vs_fp32",
                    "host_bound",
                    key=KEY,
                ).assign(ranked_on=best["ranked_on"]),
            )
        )
    return items


def _biggest(beyond: pd.DataFrame) -> dict | None:
    """The biggest step beyond noise that is faster than the rung below; None where none is."""
    faster_steps = beyond[beyond["speedup_vs_previous"] > 1]
    if not len(faster_steps):
        return None
    top = faster_steps.loc[faster_steps["speedup_vs_previous"].idxmax()]
    return {
        "rung": top["rung"],
        "previous": top["previous_rung"],
        "faster": faster(top["speedup_vs_previous"]),
        "on_gpu": _on_gpu(top),
    }


def _host_decided(size, beyond: pd.DataFrame, compared: pd.DataFrame) -> list[Finding]:
    """Where the wall time and the GPU time disagree on the direction, the host decided the step."""
    opposite = (beyond["speedup_vs_previous"] > 1) != (beyond["gpu_speedup_vs_previous"] > 1)
    hidden = beyond[beyond["host_bound"].astype(bool) & beyond["gpu_speedup_vs_previous"].notna() & opposite]
    return [
        Finding(
            _say(
                "host_decided",
                size=size,
                rung=row["rung"],
                previous=row["previous_rung"],
                faster=faster(row["speedup_vs_previous"]),
                busy=row["gpu_busy_ms"],
                median=row["median_ms"],
                gpu_faster=faster(row["gpu_speedup_vs_previous"]),
            ),
            compared.loc[[row.name]],
        )
        for _, row in hidden.iterrows()
    ]


@finds
def _steps(ladder: pd.DataFrame) -> list[Finding]:
    """Per size, the steps from the rung below: the biggest beyond noise, and those within it (not ranked)."""
    items = []
    steps = ladder.dropna(subset=["speedup_vs_previous"])
    for size, part in steps.groupby("size", sort=False, observed=True):
        beyond = part[part["apart_from_previous"].fillna(False).astype(bool)]
        compared = rows_behind(
            part.assign(beyond_noise=part.index.isin(beyond.index)),
            "previous_rung",
            "median_ms",
            "ci_low_ms",
            "ci_high_ms",
            "speedup_vs_previous",
            "step_vs_previous_noise",
            "beyond_noise",
            "gpu_busy_ms",
            "gpu_speedup_vs_previous",
            "host_bound",
            "noisy",
            key=KEY,
        )
        items.append(Finding(_say("biggest_step", size=size, top=_biggest(beyond)), compared))
        within = part.index.difference(beyond.index)
        if len(within):
            rows = part.loc[within]
            on_gpu_of = [(r["rung"], _on_gpu(r)) for _, r in rows.iterrows() if _on_gpu(r)]
            items.append(
                Finding(
                    _say(
                        "within_noise",
                        size=size,
                        names=list(rows["rung"]),
                        by=_why(part),
                        on_gpu_of=on_gpu_of,
                    ),
                    compared.loc[within],
                )
            )
        items.extend(_host_decided(size, beyond, compared))
    return items


def _why(rows: pd.DataFrame) -> str:
    """What "within noise" means for these rungs (findings.j2's `why`): "intervals" where they overlap,
    or "noise" (one process, no interval) where the medians are closer than the larger of the two rungs'
    step-to-step noise."""
    if {"ci_low_ms", "ci_high_ms"} <= set(rows) and rows["ci_low_ms"].notna().any():
        return "intervals"
    return "noise"


def _on_gpu(row) -> str | None:
    """A rung step's GPU-time ratio in words, where the rows have the GPU busy time; else None."""
    ratio = row.get("gpu_speedup_vs_previous")
    on_a_cpu = str(row.get("gpu", "")).startswith("cpu")  # its "GPU time" is CPU operator time
    return faster(ratio) if pd.notna(ratio) and not on_a_cpu else None


@finds
def _breakdown(ladder: pd.DataFrame) -> list[Finding]:
    """Where the best rung's step goes: its profiled time per category, each one's share, the rest."""
    breakdown = breakdown_frame(ladder)
    if breakdown.empty:
        return []
    items = []
    for _, best in best_rungs(ladder).iterrows():
        row = breakdown[(breakdown["size"] == best["size"]) & (breakdown["rung_key"] == best["rung_key"])]
        if row.empty or not row["gpu_busy_ms"].iloc[0] > 0:
            continue
        row = row.iloc[0]
        parts = sorted(
            ((category, row[column]) for column, category in CATEGORY_COLUMNS.items() if row[column] > 0),
            key=lambda kv: -kv[1],
        )[:3]
        rest = None
        if row["not_busy_ms"] > 0:
            rest = {
                "ms": row["not_busy_ms"],
                "median": row["median_ms"],
                "on_cpu": on_cpu(ladder),
                "kernel": None if on_cpu(ladder) else _per_kernel(ladder, best),
            }
        text = _say(
            "breakdown",
            size=best["size"],
            rung=best["rung"],
            busy=row["gpu_busy_ms"],
            time=time_words(ladder),
            parts=[(c, 100 * ms / row["gpu_busy_ms"]) for c, ms in parts],
            rest=rest,
        )
        behind = {
            **{c: row[c] for c in KEY},
            "median_ms": row["median_ms"],
            "gpu_busy_ms": row["gpu_busy_ms"],
            "not_busy_ms": row["not_busy_ms"],
        }
        for column, category in CATEGORY_COLUMNS.items():
            if row[column] > 0:
                behind[column] = row[column]
                behind[f"share_{category}"] = row[column] / row["gpu_busy_ms"]
        items.append(Finding(text, behind))
    return items


def _per_kernel(ladder: pd.DataFrame, best) -> str:
    """The step's wall time per kernel launched, beside the size's other rungs' (review M6: a CUDA-graph
    rung whose host time still scales with its kernels at the eager rungs' cost launches them one by one:
    part of its step runs outside the graph); "" where the kernels were not counted."""
    if "kernels_per_step" not in ladder:
        return ""
    size = ladder[(ladder["size"] == best["size"]) & (ladder["status"] == "ok")]
    per = (size["median_ms"] * 1e3 / pd.to_numeric(size["kernels_per_step"], errors="coerce")).dropna()
    if best.name not in per.index or len(per) < 2:
        return ""
    mine, others = per[best.name], per.drop(best.name)
    graph = "graph" in str(best["rung"]).lower() and others.min() * 0.7 <= mine <= others.max() * 1.3
    return _say(
        "per_kernel",
        mine=mine,
        kernels=int(size.loc[best.name, "kernels_per_step"]),
        low=others.min(),
        high=others.max(),
        graph=graph,
    )


@finds
def _unsupported(ladder: pd.DataFrame) -> list[Finding]:
    unsupported = ladder[ladder["status"] == "unsupported"]
    items = []
    for _, part in unsupported.groupby("rung_key", sort=False):
        sizes = list(dict.fromkeys(part["size"].astype(str)))
        # The reason as the job wrote it, its own spacing kept (the template's lines are joined by spaces).
        text = _say("unsupported", rung=part["rung"].iloc[0], sizes=sizes, reason=_REASON)
        items.append(
            Finding(
                text.replace(_REASON, str(part["reason"].iloc[0])),
                rows_behind(part, "status", "reason", key=KEY),
            )
        )
    return items


_REASON = "\x00reason\x00"  # where the reason goes in the unsupported sentence


@finds
def _oom(ladder: pd.DataFrame) -> list[Finding]:
    oom = ladder[ladder["status"] == "OOM"]
    if not len(oom):
        return []
    return [
        Finding(
            _say("oom", names=[f"{r['size']} {r['rung']}" for _, r in oom.iterrows()]),
            rows_behind(oom, "status", key=KEY),
        )
    ]


# The rows behind the ceiling's finding: each measurement's GPU, rates and clocks, those the run has.
_CEILING_COLUMNS = (
    "size",
    "rung_key",
    "gpu",
    "gpu_uuid",
    "n",
    "ceiling_tflops",
    "median_tflops",
    "first_burst_tflops",
    "best_burst_tflops",
    "bursts",
    "settled",
    "short_tflops",
    "sm_clock_mhz",
    "max_sm_clock_mhz",
    "power_w",
)


@finds
def _ceiling(matmul: pd.DataFrame) -> list[Finding]:
    """The measured matmul ceiling beside the datasheet peak and the short bursts' rate, over every GPU
    it was measured on, each named for what it is, with the clocks read during the steady bursts."""
    from lmstudy.analyse.ladder_table import SETTLED_WITHIN
    from lmstudy.report.answers import span

    found = ceilings(matmul)
    if found.empty:
        return []
    gpu = str(found["gpu"].iloc[0]) if "gpu" in found else ""
    datasheet = hardware.peak_tflops(gpu, "bf16", False)
    lo, hi = found["ceiling_tflops"].min(), found["ceiling_tflops"].max()
    best = found.loc[found["ceiling_tflops"].idxmax()]
    uuids = found.get("gpu_uuid", pd.Series(dtype=object)).dropna().astype(str)
    sustained = "settled" in found
    unsettled = found[~found["settled"].astype(bool)] if sustained else found.iloc[0:0]
    short = _numbers(found, "short_tflops").dropna()

    def of_datasheet(low: float, high: float) -> str | None:
        return span(low / datasheet * 100, high / datasheet * 100, ".1f", "%") if datasheet else None

    text = _say(
        "ceiling",
        rate=span(lo, hi, ".4g", " TFLOP/s"),
        sustained=sustained,
        best={
            "n": int(best["n"]),
            "window": int(best["window"]) if sustained else None,
            "products": int(best["products"]) if sustained else None,
        },
        within=SETTLED_WITHIN,
        measurements=len(found),
        gpus=uuids[uuids != ""].nunique(),
        unsettled={"count": len(unsettled), "bursts": int(unsettled["bursts"].max())}
        if len(unsettled)
        else None,
        datasheet={"share": of_datasheet(lo, hi), "tflops": datasheet} if datasheet else None,
        short={
            "rate": span(short.min(), short.max(), ".4g", " TFLOP/s"),
            "share": of_datasheet(short.min(), short.max()),
        }
        if len(short)
        else None,
        clock=_clocks(found),
    )
    behind = found[[c for c in _CEILING_COLUMNS if c in found]]
    if datasheet:
        behind = behind.assign(
            datasheet_tflops=datasheet, share_of_datasheet=found["ceiling_tflops"] / datasheet
        )
    return [Finding(text, behind)]


def _numbers(found: pd.DataFrame, column: str) -> pd.Series:
    """A column of the ceilings as numbers, all missing where the run did not record it."""
    return pd.to_numeric(found.get(column, pd.Series(dtype=float)), errors="coerce")


def _clocks(found: pd.DataFrame) -> dict | None:
    """The SM clock (its span and maximum) and the power read during the bursts; None where unread."""
    from lmstudy.report.answers import span

    clock = _numbers(found, "sm_clock_mhz")
    if not clock.notna().any():
        return None
    power, top = _numbers(found, "power_w"), _numbers(found, "max_sm_clock_mhz")
    return {
        "sm": span(clock.min(), clock.max(), ".0f", " MHz"),
        "top": top.max() if top.notna().any() else None,
        "power": span(power.min(), power.max(), ".0f", " W"),
    }


# Declared in the section's contract: each writes one kind of finding with the rows behind it.
FINDINGS = (_ceiling, _best, _steps, _breakdown, _unsupported, _oom)
