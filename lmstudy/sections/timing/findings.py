"""Section 1, end-to-end timing: the functions that compute its findings (sentences) from its tables.

Honest to noise and to physics (lmstudy.analyse.trust): trends use the rows
that are neither host-bound nor noisy, or the GPU's busy time, and say what
they left out; nothing is ranked where the intervals overlap; a table that
breaks physics (a training step faster than forward+backward) is reported as
noise, never as a finding.
"""

from __future__ import annotations

import statistics

import pandas as pd

from lmstudy.analyse.tables import steady_rows, steady_warmup
from lmstudy.analyse.trust import physics_violations, trusted
from lmstudy.report.answers import count, processes_text, span
from lmstudy.report.contract import wording
from lmstudy.report.coverage import column, recorded, with_columns
from lmstudy.report.finding import Finding, finds, gather, rows_behind, with_used
from lmstudy.report.labels import PASS_LABELS, cold_start_costs, peak_words
from lmstudy.sections.timing.tables import (
    KEY,
    backward_frame,
    early_over_steady,
    speedup_frame,
)

_say = wording(__name__)


def _label(row) -> dict:
    """A timing row's configuration, as findings.j2's label() writes it."""
    return {
        "size": row["size"],
        "context": row["context_length"],
        "step": PASS_LABELS[row["pass"]],
        "precision": row["precision"],
    }


def _left_out_rows(considered: pd.DataFrame, used: pd.DataFrame) -> pd.DataFrame:
    """The considered rows a sentence left out (host-bound or noisy), with their flags."""
    left_out = considered[~considered.index.isin(used.index)]
    return rows_behind(left_out, "host_bound", "noisy").assign(used=False)


@finds
def _oom(frame: pd.DataFrame) -> list[Finding]:
    rows = steady_rows(frame)
    oom = rows[rows["status"] == "OOM"]
    items = []
    for size, part in oom.groupby("size", observed=True):
        items.append(
            Finding(
                _say(
                    "oom",
                    size=size,
                    configurations=count(len(part), "configuration"),
                    contexts=sorted(part["context_length"].unique()),
                    steps=[PASS_LABELS[p] for p in part["pass"].unique()],
                    precisions=sorted(part["precision"].unique()),
                ),
                rows_behind(part, "status"),
            )
        )
    return items


@finds
def _flags(stable: pd.DataFrame) -> list[Finding]:
    if "host_bound" not in stable or stable.empty:
        return []
    stable = with_columns(stable, ("processes", "gpu_busy_share"))
    host = stable["host_bound"].fillna(False).astype(bool)
    noisy = column(stable, "noisy", False).fillna(False).astype(bool)
    worst = None
    if host.any() and stable["gpu_busy_share"].notna().any():
        row = stable.loc[stable["gpu_busy_share"].idxmin()]
        worst = {**_label(row), "share": row["gpu_busy_share"], "ms": row["median_ms"]}
    text = _say(
        "flags",
        rows=len(stable),
        host=int(host.sum()),
        noisy=int(noisy.sum()),
        processes=processes_text(stable["processes"]),
        worst=worst,
    )
    behind = rows_behind(stable, "processes", "host_bound", "noisy", "median_ms", "gpu_busy_share")
    return [Finding(text, behind)]


@finds
def _mfu(stable: pd.DataFrame) -> list[Finding]:
    """The highest MFU of each precision: an MFU compares a step with its own precision's peak; across
    precisions only the rate compares, so the highest achieved rate is said apart."""
    rated = recorded(recorded(stable, "mfu"), "achieved_tflops")
    if rated.empty:
        return []
    rated = rated.assign(**_gpu_rates(rated))
    said, best_rows = [], []
    for _, part in rated.groupby("precision", observed=True):
        # Host-bound or noisy cells: the wall-time MFU measures the host and moves between runs; the
        # rate while the GPU is busy does not, so it ranks them.
        on_gpu = _on_gpu(part)
        best = part.loc[part["gpu_mfu" if on_gpu else "mfu"].idxmax()]
        said.append({**_rates(best), "on_gpu": on_gpu, "peak": peak_words(part.loc[[best.name]])})
        best_rows.append(best.name)
    on_gpu = _on_gpu(rated)
    fastest = rated.loc[rated["gpu_tflops" if on_gpu else "achieved_tflops"].idxmax()]
    behind = rated.loc[list(dict.fromkeys([*best_rows, fastest.name]))]
    return [
        Finding(
            _say("mfu", best=said, fastest=_rates(fastest), on_gpu=on_gpu),
            rows_behind(
                behind,
                "median_ms",
                "achieved_tflops",
                "peak_tflops",
                "mfu",
                "mfu_peak",
                "tf32_matmul",
                "gpu_busy_ms",
                "gpu_tflops",
                "gpu_mfu",
                "host_bound",
                "noisy",
            ),
        )
    ]


def _rates(row) -> dict:
    """A row's MFU and rate, in wall time and over the GPU's busy time, with its configuration."""
    return {
        **_label(row),
        "mfu": row["mfu"],
        "gpu_mfu": row["gpu_mfu"],
        "tflops": row["achieved_tflops"],
        "gpu_tflops": row["gpu_tflops"],
    }


def _gpu_rates(rows: pd.DataFrame) -> dict:
    """The rate and MFU over the GPU's busy time: the step's FLOPs over the time the GPU worked."""
    busy = pd.to_numeric(rows.get("gpu_busy_ms", pd.Series(float("nan"), index=rows.index)), errors="coerce")
    scale = rows["median_ms"] / busy.where(busy > 0)
    return {"gpu_tflops": rows["achieved_tflops"] * scale, "gpu_mfu": rows["mfu"] * scale}


def _on_gpu(rows: pd.DataFrame) -> bool:
    """Whether GPU time ranks these rows: some are host-bound or noisy and every one has a GPU time."""
    flagged = any(rows[f].astype(bool).any() for f in ("host_bound", "noisy") if f in rows)
    return flagged and rows["gpu_mfu"].notna().all()


@finds
def _speedups(frame: pd.DataFrame) -> list[Finding]:
    speedups = speedup_frame(frame)
    if speedups.empty:
        return []
    items = []
    sure = trusted(speedups)
    for pass_name, part in speedups.groupby("pass", observed=True):
        kept = sure[sure["pass"] == pass_name]
        # What the GPU gains, beside the wall time: the busy time does not depend on the host.
        gpu = part["gpu_speedup"].dropna() if "gpu_speedup" in part else pd.Series(dtype=float)
        on_gpu = (
            {
                "span": span(gpu.min(), gpu.max()),
                "configurations": count(len(gpu), "configuration"),
                "one": len(gpu) == 1,
            }
            if len(gpu)
            else None
        )
        step = PASS_LABELS[pass_name].capitalize()
        if kept.empty:
            items.append(
                Finding(_say("speedups_unranked", step=step, configurations=len(part), gpu=on_gpu), part)
            )
            continue
        ends = [kept.loc[kept["speedup"].idxmin()], kept.loc[kept["speedup"].idxmax()]]
        low, high = (
            {"speedup": e["speedup"], "size": e["size"], "context": e["context_length"]} for e in ends
        )
        slower = int((kept["speedup_high"] < 1).sum()) if "speedup_high" in kept else 0
        items.append(
            Finding(
                _say(
                    "speedups",
                    step=step,
                    low=low,
                    high=high,
                    kept=len(kept),
                    total=len(part),
                    slower=slower,
                    gpu=on_gpu,
                ),
                with_used(part, kept),
            )
        )
    return items


@finds
def _cold_start(ok: pd.DataFrame, stable: pd.DataFrame) -> list[Finding]:
    if not ((ok["warmup_steps"] == 0).any() and steady_warmup(ok) > 0):
        return []
    if not {"first_step_ms", "mean_ms", "cv", "timed_steps"} <= set(ok.columns):
        return []  # not recorded: the report's opening names what
    cold = ok[ok["warmup_steps"] == 0].set_index(KEY)
    warm = stable.set_index(KEY)
    both = cold.merge(warm, left_index=True, right_index=True, suffixes=("_cold", "_warm"), how="inner")
    if both.empty:
        return []
    ratio = both["first_step_ms_cold"] / both["median_ms_warm"]
    inflation = both["mean_ms_cold"] / both["mean_ms_warm"] - 1
    behind = both[
        [
            "first_step_ms_cold",
            "median_ms_warm",
            "mean_ms_cold",
            "mean_ms_warm",
            "cv_cold",
            "cv_warm",
            "timed_steps_cold",
        ]
    ].assign(first_over_steady=ratio, mean_inflation=inflation)
    return [
        Finding(
            _say(
                "cold_start",
                median=ratio.median(),
                configurations=count(len(both), "configuration"),
                largest=ratio.max(),
                costs=cold_start_costs(ok),
                steps=int(both["timed_steps_cold"].iloc[0]),
                inflation=inflation.median(),
                cv_warm=both["cv_warm"].median(),
                cv_cold=both["cv_cold"].median(),
            ),
            behind,
        )
    ]


@finds
def _warmup_enough(ok: pd.DataFrame, stable: pd.DataFrame, max_spread: float) -> list[Finding]:
    """Steps right after w warm-ups against the steady window, from windows that do not overlap
    (timing.tables.early_over_steady), over the cells neither host-bound nor noisy."""
    warmups = sorted(ok["warmup_steps"].unique())
    if len(warmups) < 3:
        return []
    top = steady_warmup(ok)
    items = []
    rows = trusted(stable)
    for w in warmups[1:-1]:
        early = early_over_steady(rows, w) if len(rows) else pd.DataFrame()
        if early.empty:
            continue
        ratios = early["early_over_steady"]
        median = statistics.median(ratios)
        side = "within" if abs(median - 1) <= max_spread else "slower" if median > 1 else "faster"
        behind = rows.loc[early.index, [c for c in KEY if c in rows]].assign(
            used=True, processes=early["processes"], early_over_steady=ratios
        )
        items.append(
            Finding(
                _say(
                    "warmup_enough",
                    warmups=w,
                    top=top,
                    median=median,
                    largest=ratios.max(),
                    configurations=count(len(ratios), "configuration"),
                    total=len(stable),
                    kept=len(rows),
                    enough=median <= 1 + max_spread,
                    side=side,
                    max_spread=max_spread,
                ),
                pd.concat([behind, _left_out_rows(stable, rows)], ignore_index=True).assign(
                    warmup_steps=w, steady_from_step=top + 1
                ),
            )
        )
    return items


@finds
def _context_scaling(stable: pd.DataFrame) -> list[Finding]:
    """From context to context: the GPU's busy time for every size (stable between processes), the wall
    time only where both ends are trusted."""
    items = []
    train = stable[stable["pass"] == "train_step"]
    for (size, precision), part in train.groupby(["size", "precision"], observed=True):
        part = part.sort_values("context_length")
        if len(part) < 2:
            continue
        lo, hi = part.iloc[0], part.iloc[-1]
        gpu = wall = None
        if pd.notna(lo.get("gpu_busy_ms")) and pd.notna(hi.get("gpu_busy_ms")) and lo["gpu_busy_ms"] > 0:
            gpu = hi["gpu_busy_ms"] / lo["gpu_busy_ms"]
        if len(trusted(part.iloc[[0, -1]])) == 2:
            wall = hi["median_ms"] / lo["median_ms"]
        if gpu is not None or wall is not None:
            items.append(
                Finding(
                    _say(
                        "context_scaling",
                        size=size,
                        precision=precision,
                        low=lo["context_length"],
                        high=hi["context_length"],
                        tokens=hi["context_length"] / lo["context_length"],
                        gpu=gpu,
                        wall=wall,
                    ),
                    rows_behind(part.iloc[[0, -1]], "median_ms", "gpu_busy_ms", "host_bound", "noisy"),
                )
            )
    return items


@finds
def _backward(frame: pd.DataFrame) -> list[Finding]:
    backward = backward_frame(frame)
    if backward.empty:
        return []
    kept = trusted(backward)
    if kept.empty:
        return [Finding(_say("backward_unranked", configurations=len(backward)), backward)]
    ratio = kept["backward_over_forward"]
    spread = span(ratio.min(), ratio.max())
    return [
        Finding(
            _say(
                "backward",
                median=ratio.median(),
                spread=spread,
                ranged="–" in spread,
                configurations=count(len(kept), "configuration"),
                total=len(backward),
                kept=len(kept),
            ),
            with_used(backward, kept),
        )
    ]


@finds
def _physics(stable: pd.DataFrame) -> list[Finding]:
    key = ["size", "context_length", "precision", "variant"]
    violations = physics_violations(stable, key)
    if violations.empty:
        return []
    beyond = violations[violations["beyond_intervals"]]
    first = violations.iloc[0]
    example = {
        **_label(first),
        "ms": first["median_ms"],
        "contains": PASS_LABELS[first["contains"]],
        "contained_ms": first["contained_median_ms"],
    }
    text = _say("physics", cells=count(len(violations), "cell"), example=example, beyond=len(beyond))
    return [Finding(text, violations)]


# Declared in the section's contract: each writes one kind of finding with the rows behind it.
FINDINGS = (_oom, _flags, _physics, _mfu, _speedups, _cold_start, _warmup_enough, _context_scaling, _backward)


def findings(frame: pd.DataFrame, max_spread: float = 0.05) -> list[Finding]:
    """Every finding of the section, in the report's order."""
    ok = frame[frame["status"] == "ok"]
    stable = steady_rows(ok)
    return gather(
        _oom(frame),
        _flags(stable),
        _physics(stable),
        _mfu(stable),
        _speedups(frame),
        _cold_start(ok, stable),
        _warmup_enough(ok, stable, max_spread),
        _context_scaling(stable),
        _backward(frame),
    )
