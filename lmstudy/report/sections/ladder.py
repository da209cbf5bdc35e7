"""Section 7, the optimization ladder of the training step: tables, figures and findings.

From results/<run>/ladder/ladder.csv (one row per size x rung, each rung a
job of its own, joined with the matmul reference: lmstudy.analyse.ladder_table) and
ladder/matmul.csv (the dense bf16 matmul runs, with the GPU's clocks). Each
rung's achieved TFLOP/s is a share of the matmul rate measured on the same
GPU in the same run; the rungs are in the config's order (ladder.rungs),
each a step up from the one before. A rung that ran out of memory is OOM,
one the device cannot run "unsupported" with its reason: both are results.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy import hardware  # noqa: E402
from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.analyse.computed import computes_table  # noqa: E402
from lmstudy.analyse.nsys.categories import CATEGORIES  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import faster, order_sizes, size_order  # noqa: E402

CATEGORY_COLUMNS = {f"gpu_ms_{category}": category for category in CATEGORIES}
SHARE_FIGURE = "share_of_matmul.png"
TIME_FIGURE = "time_by_category.png"


def load(results: Path) -> dict[str, pd.DataFrame]:
    folder = results / "ladder"
    return {
        "rungs": result_files.read_csv(folder / "ladder.csv", missing_ok=True),
        "matmul": result_files.read_csv(folder / "matmul.csv", missing_ok=True),
    }


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
    rows["not_busy_ms"] = (rows["median_ms"] - rows["gpu_busy_ms"]).clip(lower=0)
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


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%"


def findings(ladder: pd.DataFrame) -> list[str]:
    """Sentences computed from the ladder: best rung and its share, biggest step, where the best rung's
    time goes, and which rungs could not run and why."""
    items = []
    words = time_words(ladder)
    breakdown = breakdown_frame(ladder)
    for _, best in best_rungs(ladder).iterrows():
        text = (
            f"{best['size']}: the best rung is {best['rung']}, {best['median_ms']:.2f} ms per step, "
            f"{best['achieved_tflops']:.3g} TFLOP/s"
        )
        if pd.notna(best["share_of_matmul"]):
            reference = best["achieved_tflops"] / best["share_of_matmul"]
            text += (
                f" = {best['share_of_matmul'] * 100:.1f}% of the dense bf16 matmul rate measured in this run "
                f"({reference:.3g} TFLOP/s)"
            )
        if pd.notna(best["speedup_vs_fp32"]) and best["rung_key"] != "fp32":
            text += f"; {faster(best['speedup_vs_fp32'])} than fp32"
        items.append(text + ".")
    steps = ladder.dropna(subset=["speedup_vs_previous"])
    for size, part in steps.groupby("size", sort=False, observed=True):
        top = part.loc[part["speedup_vs_previous"].idxmax()]
        if top["speedup_vs_previous"] > 1:
            items.append(
                f"{size}: the biggest step is {top['rung']} over {top['previous_rung']}, "
                f"{faster(top['speedup_vs_previous'])}."
            )
        else:
            items.append(f"{size}: no rung is faster than the one below it.")
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
        )
        if row["not_busy_ms"] > 0:
            where = "is outside those operators" if on_cpu(ladder) else "the GPU waited for the host"
            text += f"; {row['not_busy_ms']:.2f} ms of the {row['median_ms']:.2f} ms step {where}"
        items.append(text + ".")
    unsupported = ladder[ladder["status"] == "unsupported"]
    for _, part in unsupported.groupby("rung_key", sort=False):
        sizes = ", ".join(dict.fromkeys(part["size"].astype(str)))
        reason = str(part["reason"].iloc[0])
        items.append(f"Could not run here: {part['rung'].iloc[0]} ({sizes}): {reason}")
    oom = ladder[ladder["status"] == "OOM"]
    if len(oom):
        names = ", ".join(f"{r['size']} {r['rung']}" for _, r in oom.iterrows())
        items.append(f"Out of memory: {names}.")
    return items


def make_figures(results: Path, out_dir: Path) -> None:
    """The share of the matmul rate per rung and size; and each profiled rung's time by category."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ladder = ladder_frame(load(results)["rungs"])
    if ladder.empty:
        return
    _share_figure(ladder, out_dir / SHARE_FIGURE)
    breakdown = breakdown_frame(ladder)
    if not breakdown.empty:
        _time_figure(ladder, breakdown, out_dir / TIME_FIGURE)


def _rung_order(ladder: pd.DataFrame) -> list[str]:
    return list(ladder.sort_values("rung_index", kind="stable")["rung"].drop_duplicates())


def _share_figure(ladder: pd.DataFrame, path: Path) -> None:
    sizes = size_order(ladder["size"].astype(str))
    rungs = _rung_order(ladder)
    fig, axes = plots.subplots(1, 1, figsize=(max(5.0, 1.2 * len(rungs) * len(sizes) / 2 + 3), 3.8))
    ax = axes[0][0]
    width = 0.8 / len(rungs)
    missing = []
    for i, rung in enumerate(rungs):
        g = ladder[ladder["rung"] == rung].assign(size=lambda f: f["size"].astype(str)).set_index("size")
        g = g.reindex(sizes)
        x = [j + i * width for j in range(len(sizes))]
        values = g["share_of_matmul"] * 100
        bars = ax.bar(x, values.fillna(0), width, label=rung)
        for xi, value, status in zip(x, values, g["status"], strict=True):
            if value != value:
                shown = "not measured" if status != status else str(status)
                missing.append((xi, shown, bars[0].get_facecolor()))
    ax.set_xticks([j + width * (len(rungs) - 1) / 2 for j in range(len(sizes))], sizes)
    ax.set_ylabel("share of the measured bf16 matmul rate (%)")
    low, high = ax.get_ylim()
    for xi, status, color in missing:
        plots.mark_missing(ax, xi, low + 0.04 * (high - low), status, color)
    plots.legend_outside(fig, axes, title="rung")
    ax.set_title("Training step: achieved TFLOP/s as a share of the matmul rate")
    fig.savefig(path)
    plt.close(fig)


def _time_figure(ladder: pd.DataFrame, breakdown: pd.DataFrame, path: Path) -> None:
    sizes = [s for s in size_order(ladder["size"].astype(str)) if s in set(breakdown["size"].astype(str))]
    rungs = _rung_order(ladder)
    words = time_words(ladder)
    colors = plt.get_cmap("tab10").colors
    fig, axes = plots.subplots(
        1, len(sizes), figsize=(max(4.0, 0.55 * len(rungs) + 1.6) * len(sizes) + 1.8, 4.2)
    )
    for ax, size in zip(axes[0], sizes, strict=True):
        part = ladder[ladder["size"].astype(str) == size].set_index("rung").reindex(rungs)
        profiled = breakdown[breakdown["size"].astype(str) == size].set_index("rung").reindex(rungs)
        x = list(range(len(rungs)))
        bottom = pd.Series(0.0, index=profiled.index)
        for color, (column, category) in zip(colors, CATEGORY_COLUMNS.items(), strict=False):
            values = profiled[column].fillna(0.0)
            if (values > 0).any():
                ax.bar(x, values, bottom=bottom, label=category, color=color)
                bottom += values
        ax.scatter(x, profiled["median_ms"], marker="_", s=200, color="black", zorder=5,
                   label="step (median)")
        low, high = ax.get_ylim()
        for xi, status, busy in zip(x, part["status"], profiled["gpu_busy_ms"], strict=True):
            if busy != busy:
                shown = status if isinstance(status, str) and status != "ok" else "not profiled"
                plots.mark_missing(ax, xi, low + 0.04 * (high - low), shown)
        ax.set_xticks(x, [part.loc[rung, "rung_key"] for rung in rungs], rotation=35, ha="right",
                      fontsize="x-small")
        ax.set_title(size)
        ax.set_ylabel(f"{words} per step (ms)")
    plots.legend_outside(fig, axes, title="category")
    fig.savefig(path)
    plt.close(fig)


def _how(ladder: pd.DataFrame, matmul: pd.DataFrame) -> str:
    first = ladder.iloc[0]
    text = (
        f"The training step (forward, backward, AdamW) at context length {int(first['context_length'])}, "
        f"batch {int(first['batch_size'])}, one rung after another, each a step up from the one before "
        "(ladder.rungs in config.yaml; README: the optimization ladder). Each size x rung is a job and a "
        "process of its own: the first step alone (torch.compile compiles in it), then "
        f"{int(first['warmup_steps'])} warm-up and {int(first['timed_steps'])} timed steps give the median"
    )
    profiled = int(first.get("profile_steps", 0) or 0)
    if profiled:
        text += (
            f", then {profiled} profiled step{'s' if profiled > 1 else ''} (torch.profiler) give the "
            f"{time_words(ladder)} per step by kernel category"
        )
        if on_cpu(ladder):
            text += " (on a CPU, torch.profiler records CPU operators, not GPU kernels)"
    text += ". TFLOP/s counts the model's FLOPs (6N + 12·L·H·Q·T per token)."
    if not matmul.empty:
        runs = ", ".join(f"{r['kind']} of {int(r['repeats'])}" for _, r in matmul.iterrows())
        text += (
            f" Each rung's share is of the dense bf16 {int(matmul['n'].iloc[0])}³ matrix-multiply rate "
            f"measured on the same device in the same run ({runs} products; the higher is the reference)."
        )
    text += (
        " A rung the device cannot run (CUDA graphs or a forced flash/cuDNN attention on a CPU, a missing "
        "compiler) is shown as unsupported, with the reason; out of memory as OOM. "
        "scripts/bench_ladder.py runs the same measurement by hand."
    )
    return text


def build(results: Path, figures: Path) -> Section:
    section = Section("ladder", "7. The optimization ladder of the training step")
    data = load(results)
    ladder = ladder_frame(data["rungs"])
    if ladder.empty:
        return section.add(Text("No ladder results: the section is switched off or produced no rows."))
    section.add(Text(_how(ladder, data["matmul"])))
    section.add(Findings(findings(ladder)))
    section.add(Table("Rungs per size", ladder_table(ladder), name="ladder_rungs"))
    if (figures / SHARE_FIGURE).exists():
        section.add(
            Figure(
                figures / SHARE_FIGURE,
                "Each rung's achieved TFLOP/s as a share of the matmul rate measured in this run.",
                data="ladder_rungs",
            )
        )
    if best_rungs(ladder).shape[0]:
        section.add(Table("The best rung of each size", best_table(ladder), name="ladder_best"))
    if not data["matmul"].empty:
        section.add(
            Table("The matmul reference: dense bf16 matrix products", matmul_table(data["matmul"]),
                  name="ladder_matmul")
        )
    breakdown = breakdown_frame(ladder)
    if not breakdown.empty:
        words = time_words(ladder)
        note = (
            "On a CPU, torch.profiler records CPU operators, not GPU kernels: these are CPU operator times, "
            "and the rest of the step is time outside them (Python, autograd)."
            if on_cpu(ladder) else
            "The rest of the step is its median less the GPU's busy time: the GPU waiting for the host."
        )
        section.add(
            Table(
                f"{words} per step by kernel category, per rung",
                breakdown_table(breakdown, words),
                note=note,
                name="ladder_time_by_category",
            )
        )
        if (figures / TIME_FIGURE).exists():
            section.add(
                Figure(
                    figures / TIME_FIGURE,
                    f"{words} per step by kernel category, per rung (named by its key in ladder.rungs); "
                    "the black mark is the step's median.",
                    data="ladder_time_by_category",
                )
            )
    return section
