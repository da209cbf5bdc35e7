"""Section 7, the optimization ladder of the training step.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy import hardware
from lmstudy.analyse.ladder_table import ceilings
from lmstudy.report.contract import words
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


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%"


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


@finds
def _best(ladder: pd.DataFrame) -> list[Finding]:
    """Per size, the best rung: its row first, then the rungs within noise of it (`best` says which)."""
    items = []
    for _, best in best_rungs(ladder).iterrows():
        on_gpu = best["ranked_on"] == "GPU time"
        fp32 = ladder[(ladder["size"] == best["size"]) & (ladder["rung_key"] == "fp32")]
        if on_gpu:
            # Host-bound rungs: wall time measures the host, so the GPU's busy time ranks them.
            text = (
                f"{best['size']}: the rungs are host-bound (†), so GPU time ranks them: the best rung is "
                f"{best['rung']}, {best['gpu_busy_ms']:.3g} ms of GPU time per step"
                + (f" ({faster(best['gpu_speedup_vs_fp32'])} than fp32 on the GPU)"
                   if pd.notna(best.get("gpu_speedup_vs_fp32")) and best["rung_key"] != "fp32" else "")
                + f"; its wall step {best['median_ms']:.2f} ms"
                + (f" ({best['ci_low_ms']:.3g}–{best['ci_high_ms']:.3g})"
                   if pd.notna(best.get("ci_low_ms")) and pd.notna(best.get("ci_high_ms")) else "")
                + f", {best['achieved_tflops']:.3g} TFLOP/s"
            )
        else:
            text = (
                f"{best['size']}: the best rung is {best['rung']}, {best['median_ms']:.2f} ms per step, "
                f"{best['achieved_tflops']:.3g} TFLOP/s"
            )
        if pd.notna(best.get("mfu")):
            text += (
                f", MFU {best['mfu'] * 100:.1f}% of the {hardware.PEAK_NAMES[best['mfu_peak']]} "
                f"({best['peak_tflops']:.1f} TFLOP/s)"
            )
        if pd.notna(best["share_of_matmul"]):
            device = "CPU" if on_cpu(ladder[ladder["size"] == best["size"]]) else "GPU"
            text += (
                f" = {best['share_of_matmul'] * 100:.1f}% of the dense bf16 matmul ceiling measured on its "
                f"{device} ({best['matmul_tflops']:.4g} TFLOP/s)"
            )
            if best["share_of_matmul"] > 1:
                # A step cannot outrun the device's dense matmul rate: the ceiling was measured low.
                text += (
                    " (above 100%: the measured ceiling is no ceiling here: its bursts ran slower than "
                    "the step's matmuls"
                    + (", as a CPU's clocks and threads vary from one measurement to the next)"
                       if device == "CPU" else "; measure it again on an idle GPU)")
                )
        if pd.notna(best["speedup_vs_fp32"]) and best["rung_key"] != "fp32":
            # A wall-time speed-up is stated only where the intervals tell the two apart.
            if len(fp32) and within_noise(best, fp32.iloc[0]):
                text += (f"; in wall time {best['speedup_vs_fp32']:.2f}× fp32's speed, not decided "
                         f"({_why(ladder)})")
            else:
                text += f"; {faster(best['speedup_vs_fp32'])} than fp32" + (" in wall time" if on_gpu else "")
        if best["tied_with"]:
            why = "their GPU times' process ranges overlap" if on_gpu else _why(ladder)
            text += f"; {', '.join(best['tied_with'])} within noise of it ({why}), so not ranked below it"
        size = ladder[ladder["size"] == best["size"]]
        tied = size[size["rung"].isin(best["tied_with"]) & (size.index != best.name)]
        behind = pd.concat([ladder.loc[[best.name]], tied]).assign(best=[True] + [False] * len(tied))
        items.append(Finding(text + ".", rows_behind(
            behind, "best", "median_ms", "step_noise", "achieved_tflops", "mfu", "mfu_peak", "peak_tflops",
            "share_of_matmul", "matmul_tflops", "speedup_vs_fp32", "gpu_busy_ms", "gpu_speedup_vs_fp32",
            "host_bound", key=KEY).assign(ranked_on=best["ranked_on"])))
    return items


@finds
def _steps(ladder: pd.DataFrame) -> list[Finding]:
    """Per size, the steps from the rung below: the biggest beyond noise, and those within it (not ranked)."""
    items = []
    steps = ladder.dropna(subset=["speedup_vs_previous"])
    for size, part in steps.groupby("size", sort=False, observed=True):
        beyond = part[part["apart_from_previous"].fillna(False).astype(bool)]
        faster_steps = beyond[beyond["speedup_vs_previous"] > 1]
        compared = rows_behind(part.assign(beyond_noise=part.index.isin(beyond.index)), "previous_rung",
                               "median_ms", "ci_low_ms", "ci_high_ms", "speedup_vs_previous",
                               "step_vs_previous_noise", "beyond_noise", "gpu_busy_ms",
                               "gpu_speedup_vs_previous", "host_bound", "noisy", key=KEY)
        if len(faster_steps):
            top = faster_steps.loc[faster_steps["speedup_vs_previous"].idxmax()]
            items.append(Finding(
                f"{size}: the biggest step beyond noise is {top['rung']} over {top['previous_rung']}, "
                f"{faster(top['speedup_vs_previous'])}{_on_gpu(top)}.", compared))
        else:
            items.append(Finding(f"{size}: no rung is faster than the one below it beyond noise.", compared))
        within = part.index.difference(beyond.index)
        if len(within):
            names = ", ".join(part.loc[within, "rung"])
            items.append(Finding(
                f"{size}: {names} {'is' if len(within) == 1 else 'are'} within noise of the rung below "
                f"({_why(part)}): not ranked" + "".join(
                    f"; {r['rung']}{_on_gpu(r)}" for _, r in part.loc[within].iterrows() if _on_gpu(r))
                + ".", compared.loc[within]))
        # Where the wall time and the GPU time disagree on the direction, the host decided the step.
        opposite = (beyond["speedup_vs_previous"] > 1) != (beyond["gpu_speedup_vs_previous"] > 1)
        hidden = beyond[beyond["host_bound"].astype(bool) & beyond["gpu_speedup_vs_previous"].notna()
                        & opposite]
        for _, row in hidden.iterrows():
            items.append(Finding(
                f"{size}: {row['rung']} is {faster(row['speedup_vs_previous'])} than {row['previous_rung']} "
                f"in wall time, but its step is host-bound (†: the GPU busy {row['gpu_busy_ms']:.3g} ms of "
                f"{row['median_ms']:.3g}), so that is the host's time: on the GPU it is "
                f"{faster(row['gpu_speedup_vs_previous'])}.", compared.loc[[row.name]]))
    return items


def _why(rows: pd.DataFrame) -> str:
    """What "within noise" means for these rungs: overlapping intervals, or (one process, no interval)
    medians closer than the larger of the two rungs' step-to-step noise."""
    if {"ci_low_ms", "ci_high_ms"} <= set(rows) and rows["ci_low_ms"].notna().any():
        return "their intervals overlap"
    return "the larger of the two rungs' noise"


def _on_gpu(row) -> str:
    """A rung step's GPU-time ratio in words, where the rows have the GPU busy time."""
    ratio = row.get("gpu_speedup_vs_previous")
    on_a_cpu = str(row.get("gpu", "")).startswith("cpu")  # its "GPU time" is CPU operator time
    return f" (on the GPU {faster(ratio)})" if pd.notna(ratio) and not on_a_cpu else ""


@finds
def _breakdown(ladder: pd.DataFrame) -> list[Finding]:
    """Where the best rung's step goes: its profiled time per category, each one's share, the rest."""
    breakdown = breakdown_frame(ladder)
    if breakdown.empty:
        return []
    words = time_words(ladder)
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
        text = (
            f"{best['size']}, {best['rung']}: of its {row['gpu_busy_ms']:.2f} ms of {words} per step, "
            + ", ".join(f"{category} {_pct(ms, row['gpu_busy_ms'])}" for category, ms in parts)
            if parts else f"{best['size']}, {best['rung']}: {row['gpu_busy_ms']:.2f} ms of {words} per step"
        )
        if row["not_busy_ms"] > 0:
            where = "is outside those operators" if on_cpu(ladder) else "the GPU waited for the host"
            text += f"; {row['not_busy_ms']:.2f} ms of the {row['median_ms']:.2f} ms step {where}"
            if not on_cpu(ladder):
                text += _per_kernel(ladder, best)
        behind = {**{c: row[c] for c in KEY}, "median_ms": row["median_ms"],
                  "gpu_busy_ms": row["gpu_busy_ms"], "not_busy_ms": row["not_busy_ms"]}
        for column, category in CATEGORY_COLUMNS.items():
            if row[column] > 0:
                behind[column] = row[column]
                behind[f"share_{category}"] = row[column] / row["gpu_busy_ms"]
        items.append(Finding(text + ".", behind))
    return items


def _per_kernel(ladder: pd.DataFrame, best) -> str:
    """The step's wall time per kernel launched, beside the size's other rungs' (review M6: a CUDA-graph
    rung whose host time still scales with its kernels at the eager rungs' cost launches them one by one:
    part of its step runs outside the graph)."""
    if "kernels_per_step" not in ladder:
        return ""
    size = ladder[(ladder["size"] == best["size"]) & (ladder["status"] == "ok")]
    per = (size["median_ms"] * 1e3 / pd.to_numeric(size["kernels_per_step"], errors="coerce")).dropna()
    if best.name not in per.index or len(per) < 2:
        return ""
    mine, others = per[best.name], per.drop(best.name)
    text = (f" ({mine:.0f} µs of step per kernel launched, {int(size.loc[best.name, 'kernels_per_step'])} "
            f"a step; the other rungs {others.min():.0f}–{others.max():.0f} µs")
    if "graph" in str(best["rung"]).lower() and others.min() * 0.7 <= mine <= others.max() * 1.3:
        text += (": the host pays for this rung's kernels about as the rungs without graphs do, which a "
                 "replayed CUDA graph would not, so part of its step runs outside the graph")
    return text + ")"


@finds
def _unsupported(ladder: pd.DataFrame) -> list[Finding]:
    unsupported = ladder[ladder["status"] == "unsupported"]
    items = []
    for _, part in unsupported.groupby("rung_key", sort=False):
        sizes = ", ".join(dict.fromkeys(part["size"].astype(str)))
        reason = str(part["reason"].iloc[0])
        items.append(Finding(f"Could not run here: {part['rung'].iloc[0]} ({sizes}): {reason}",
                             rows_behind(part, "status", "reason", key=KEY)))
    return items


@finds
def _oom(ladder: pd.DataFrame) -> list[Finding]:
    oom = ladder[ladder["status"] == "OOM"]
    if not len(oom):
        return []
    names = ", ".join(f"{r['size']} {r['rung']}" for _, r in oom.iterrows())
    return [Finding(f"Out of memory: {names}.", rows_behind(oom, "status", key=KEY))]


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

    text = words(
        "ladder", "findings.j2", "ceiling", rate=span(lo, hi, ".4g", " TFLOP/s"), sustained=sustained,
        best={"n": int(best["n"]), "window": int(best["window"]) if sustained else None,
              "products": int(best["products"]) if sustained else None},
        within=SETTLED_WITHIN, measurements=len(found), gpus=uuids[uuids != ""].nunique(),
        unsettled={"count": len(unsettled), "bursts": int(unsettled["bursts"].max())}
        if len(unsettled) else None,
        datasheet={"share": of_datasheet(lo, hi), "tflops": datasheet} if datasheet else None,
        short={"rate": span(short.min(), short.max(), ".4g", " TFLOP/s"),
               "share": of_datasheet(short.min(), short.max())} if len(short) else None,
        clock=_clocks(found))
    behind = found[[c for c in ("size", "rung_key", "gpu", "gpu_uuid", "n", "ceiling_tflops",
                                "median_tflops", "first_burst_tflops", "best_burst_tflops", "bursts",
                                "settled", "short_tflops", "sm_clock_mhz", "max_sm_clock_mhz", "power_w")
                    if c in found]]
    if datasheet:
        behind = behind.assign(datasheet_tflops=datasheet,
                               share_of_datasheet=found["ceiling_tflops"] / datasheet)
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
    return {"sm": span(clock.min(), clock.max(), ".0f", " MHz"),
            "top": top.max() if top.notna().any() else None,
            "power": span(power.min(), power.max(), ".0f", " W")}


# Declared in the section's contract: each writes one kind of finding with the rows behind it.
FINDINGS = (_ceiling, _best, _steps, _breakdown, _unsupported, _oom)
