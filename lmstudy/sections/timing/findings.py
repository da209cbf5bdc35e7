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
from lmstudy.report.coverage import column, recorded, with_columns
from lmstudy.report.finding import Finding, finds, gather, rows_behind, with_used
from lmstudy.report.labels import PASS_LABELS, cold_start_costs, peak_words
from lmstudy.sections.timing.tables import (
    KEY,
    backward_frame,
    early_over_steady,
    speedup_frame,
)


def _label(row) -> str:
    return f"{row['size']} ctx {row['context_length']} {PASS_LABELS[row['pass']]} {row['precision']}"


def _left_out(total: int, kept: int, why: str = "host-bound or noisy") -> str:
    return f"; {total - kept} of {total} left out as {why}" if total > kept else ""


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
        contexts = ", ".join(str(c) for c in sorted(part["context_length"].unique()))
        passes = ", ".join(PASS_LABELS[p] for p in part["pass"].unique())
        precisions = ", ".join(sorted(part["precision"].unique()))
        items.append(Finding(
            f"{size} ran out of memory in {count(len(part), 'configuration')}: context {contexts}; "
            f"{passes}; {precisions}.", rows_behind(part, "status")))
    return items


@finds
def _flags(stable: pd.DataFrame) -> list[Finding]:
    if "host_bound" not in stable or stable.empty:
        return []
    stable = with_columns(stable, ("processes", "gpu_busy_share"))
    host = stable["host_bound"].fillna(False).astype(bool)
    noisy = column(stable, "noisy", False).fillna(False).astype(bool)
    text = (
        f"Of {len(stable)} steady-state rows, {int(host.sum())} are host-bound (†) and {int(noisy.sum())} "
        f"noisy (‡) (each configuration measured in {processes_text(stable['processes'])})"
    )
    if host.any() and stable["gpu_busy_share"].notna().any():
        worst = stable.loc[stable["gpu_busy_share"].idxmin()]
        text += (f"; the GPU is busy least in {_label(worst)}, {worst['gpu_busy_share'] * 100:.0f}% of "
                 f"its {worst['median_ms']:.3g} ms step")
    behind = rows_behind(stable, "processes", "host_bound", "noisy", "median_ms", "gpu_busy_share")
    return [Finding(text + ".", behind)]


@finds
def _mfu(stable: pd.DataFrame) -> list[Finding]:
    """The highest MFU of each precision: an MFU compares a step with its own precision's peak; across
    precisions only the rate compares, so the highest achieved rate is said apart."""
    rated = recorded(recorded(stable, "mfu"), "achieved_tflops")
    if rated.empty:
        return []
    rated = rated.assign(**_gpu_rates(rated))
    parts, best_rows = [], []
    for precision, part in rated.groupby("precision", observed=True):
        if _on_gpu(part):
            # Host-bound or noisy cells: the wall-time MFU measures the host and moves between runs;
            # the rate while the GPU is busy does not, so it ranks them.
            best = part.loc[part["gpu_mfu"].idxmax()]
            parts.append(
                f"{precision} {best['gpu_mfu'] * 100:.1f}% {peak_words(part.loc[[best.name]])} over the "
                f"GPU's busy time ({best['gpu_tflops']:.1f} TFLOP/s, {_label(best)}; its wall-time MFU, "
                f"{best['mfu'] * 100:.1f}%, not ranked: host-bound or noisy cells)"
            )
        else:
            best = part.loc[part["mfu"].idxmax()]
            parts.append(
                f"{precision} {best['mfu'] * 100:.1f}% {peak_words(part.loc[[best.name]])} "
                f"({best['achieved_tflops']:.1f} TFLOP/s, {_label(best)})"
            )
        best_rows.append(best.name)
    on_gpu = _on_gpu(rated)
    fastest = rated.loc[rated["gpu_tflops" if on_gpu else "achieved_tflops"].idxmax()]
    rate = (f"{fastest['gpu_tflops']:.1f} TFLOP/s over the GPU's busy time ({_label(fastest)})" if on_gpu
            else f"{fastest['achieved_tflops']:.1f} TFLOP/s ({_label(fastest)})")
    behind = rated.loc[list(dict.fromkeys([*best_rows, fastest.name]))]
    return [Finding(
        "The highest MFU, each precision over its own datasheet peak: " + "; ".join(parts) + ". "
        f"The highest achieved rate is {rate}.",
        rows_behind(behind, "median_ms", "achieved_tflops", "peak_tflops", "mfu", "mfu_peak", "tf32_matmul",
                    "gpu_busy_ms", "gpu_tflops", "gpu_mfu", "host_bound", "noisy"))]


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
        on_gpu = (f"; on the GPU (busy time) bf16 is {span(gpu.min(), gpu.max())}× as fast as fp32 in "
                  f"{'the' if len(gpu) == 1 else 'all'} {count(len(gpu), 'configuration')}"
                  ) if len(gpu) else ""
        if kept.empty:
            items.append(Finding(
                f"{PASS_LABELS[pass_name].capitalize()}: no wall-time bf16 speed-up is ranked: "
                + (f"the {count(len(part), 'configuration')} is" if len(part) == 1 else
                   f"all {len(part)} configurations are")
                + f" host-bound or noisy in fp32 or bf16{on_gpu}.", part))
            continue
        lo, hi = kept.loc[kept["speedup"].idxmin()], kept.loc[kept["speedup"].idxmax()]
        low = f"{lo['speedup']:.2f}× ({lo['size']} ctx {lo['context_length']})"
        high = f"{hi['speedup']:.2f}× ({hi['size']} ctx {hi['context_length']})"
        where = ("in the one configuration" if len(kept) == 1 else "in the configurations") + \
            " neither host-bound nor noisy"
        text = (
            f"{PASS_LABELS[pass_name].capitalize()}: bf16 autocast's wall-time speed-up over fp32 is "
            f"{low if low == high else f'{low} to {high}'}"
            + (" (below 1×: slower than fp32)" if lo["speedup"] < 1 else "")
            + f" {where}" + _left_out(len(part), len(kept))
        )
        if "speedup_high" in kept:
            slower = kept[kept["speedup_high"] < 1]
            if len(slower):
                text += f"; bf16 is slower beyond the intervals in {len(slower)} of them"
        items.append(Finding(text + on_gpu + ".", with_used(part, kept)))
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
    behind = both[["first_step_ms_cold", "median_ms_warm", "mean_ms_cold", "mean_ms_warm", "cv_cold",
                   "cv_warm", "timed_steps_cold"]].assign(first_over_steady=ratio, mean_inflation=inflation)
    return [Finding(
        f"Without warm-up the first step takes {ratio.median():.1f}× the steady median "
        f"(median over {count(len(both), 'configuration')}, up to {ratio.max():.1f}×): "
        f"{cold_start_costs(ok)} are paid there. It inflates the "
        f"mean of {int(both['timed_steps_cold'].iloc[0])} timed steps by {inflation.median() * 100:.0f}% "
        f"and raises the CV from {both['cv_warm'].median():.3f} to {both['cv_cold'].median():.3f}.", behind)]


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
        verdict = ("enough" if median <= 1 + max_spread else "not enough") + (
            f" (within {max_spread:.0%} of steady)" if abs(median - 1) <= max_spread
            else f" (more than {max_spread:.0%} slower than steady)" if median > 1
            else f"; the steps after it are more than {max_spread:.0%} faster than steady, so what slows is "
                 "the steady window, not the first steps")
        behind = rows.loc[early.index, [c for c in KEY if c in rows]].assign(
            used=True, processes=early["processes"], early_over_steady=ratios)
        items.append(Finding(
            (f"Step {top}" if w + 1 == top else f"Steps {w + 1} to {top}")
            + f" (after {w} warm-up step{'s' if w > 1 else ''}) take{'s' if w + 1 == top else ''} a median "
            f"{median:.3f}× the steady window's median (steps {top + 1} on; at most {ratios.max():.3f}×) "
            f"over {count(len(ratios), 'configuration')} neither host-bound nor noisy"
            + _left_out(len(stable), len(rows)) + f": {w} warm-up step{'s are' if w > 1 else ' is'} "
            f"{verdict}.",
            pd.concat([behind, _left_out_rows(stable, rows)], ignore_index=True).assign(
                warmup_steps=w, steady_from_step=top + 1)))
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
        tokens = hi["context_length"] / lo["context_length"]
        parts = []
        if pd.notna(lo.get("gpu_busy_ms")) and pd.notna(hi.get("gpu_busy_ms")) and lo["gpu_busy_ms"] > 0:
            parts.append(f"GPU busy time grows {hi['gpu_busy_ms'] / lo['gpu_busy_ms']:.1f}×")
        ends_trusted = len(trusted(part.iloc[[0, -1]])) == 2
        if ends_trusted:
            # the verb once: "GPU busy time grows 4.0×, the step's wall time 4.0×"
            grows = "" if parts else "grows "
            parts.append(f"the step's wall time {grows}{hi['median_ms'] / lo['median_ms']:.1f}×")
        elif parts:
            parts.append("its wall time is not compared (an end is host-bound or noisy)")
        if parts:
            items.append(Finding(
                f"{size}, training step ({precision}): from context {lo['context_length']} to "
                f"{hi['context_length']} ({tokens:.0f}× the tokens) " + ", ".join(parts) + ".",
                rows_behind(part.iloc[[0, -1]], "median_ms", "gpu_busy_ms", "host_bound", "noisy")))
    return items


@finds
def _backward(frame: pd.DataFrame) -> list[Finding]:
    backward = backward_frame(frame)
    if backward.empty:
        return []
    kept = trusted(backward)
    if kept.empty:
        return [Finding(f"The backward pass is not compared with the forward: all {len(backward)} "
                        "configurations are host-bound or noisy.", backward)]
    ratio = kept["backward_over_forward"]
    spread = span(ratio.min(), ratio.max())
    return [Finding(
        "The backward pass (forward+backward minus forward, per configuration in its table) takes "
        + (f"a median {ratio.median():.2f}× the forward time (range {spread}×)" if "–" in spread
           else f"{ratio.median():.2f}× the forward time")
        + f" over {count(len(kept), 'configuration')} neither host-bound nor noisy"
        + _left_out(len(backward), len(kept))
        + "; about 2× is what the matrix products predict (two products per forward one).",
        with_used(backward, kept))]


@finds
def _physics(stable: pd.DataFrame) -> list[Finding]:
    key = ["size", "context_length", "precision", "variant"]
    violations = physics_violations(stable, key)
    if violations.empty:
        return []
    beyond = violations[violations["beyond_intervals"]]
    example = violations.iloc[0]
    text = (
        f"Noise, not physics: in {count(len(violations), 'cell')} a pass measured faster than a pass it "
        "contains "
        f"(e.g. {example['size']} ctx {example['context_length']} {example['precision']}: "
        f"{PASS_LABELS[example['pass']]} {example['median_ms']:.3g} ms against "
        f"{PASS_LABELS[example['contains']]} {example['contained_median_ms']:.3g} ms)"
    )
    text += (f"; {len(beyond)} of them beyond both intervals: those rows measured the host, not the model"
             if len(beyond) else "; every one within the intervals")
    return [Finding(text + ".", violations)]


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
