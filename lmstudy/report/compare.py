"""The comparison report of two runs: sections (tables, figures, findings) and rendering.

report/compare/<A>_vs_<B>/index.html and report.md, with tables/*.csv and
figures/*.png beside them. Reads only results/<A>/ and results/<B>/.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from lmstudy.analyse.compare import runs as R  # noqa: E402
from lmstudy.analyse.compare import tables as T  # noqa: E402
from lmstudy.analyse.compare import verdict as V  # noqa: E402
from lmstudy.atomic import write_text  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text, render  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS  # noqa: E402

VERDICT_COLORS = {V.FASTER: "tab:green", V.SLOWER: "tab:red", V.SAME: "tab:gray", V.UNDECIDED: "tab:orange",
                  V.ONE_PROCESS: "tab:olive"}


def _config(row) -> str:
    return f"{row['size']} ctx {int(row['context_length'])} {PASS_LABELS.get(row['pass'], row['pass'])}" + (
        f" {row['precision']}" if "precision" in row else ""
    )


def _times(ratio: float) -> str:
    """A time ratio B/A in words."""
    if abs(ratio - 1) < 0.005:
        return "as fast (1.00×)"
    return f"{1 / ratio:.2f}× faster" if ratio < 1 else f"{ratio:.2f}× slower"


def _than(ratio: float) -> str:
    words = _times(ratio)
    if "as fast" in words:
        return "as fast as A's (1.00×)"
    return f"{words} than A's"


def _ci(row) -> object:
    if pd.isna(row["ci_low"]):
        return math.nan
    return f"{row['ci_low']:.3f}–{row['ci_high']:.3f}"


def _shown(values: pd.Series, status: pd.Series) -> pd.Series:
    """A number where the side measured it, else its status (OOM, not measured)."""
    shown = values.astype(object)
    status = status.astype(object).where(status.notna(), T.MISSING_STATUS)
    return shown.where(status == "ok", status)


def timing_table(rows: pd.DataFrame, variant_column: bool) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "size": rows["size"],
            "context": rows["context_length"],
            "pass": rows["pass"].map(PASS_LABELS),
            "precision": rows["precision"],
        }
    )
    if variant_column:
        table["variant"] = rows["variant"]
    table["A median ms"] = _shown(rows["median_ms_a"], rows["status_a"])
    table["B median ms"] = _shown(rows["median_ms_b"], rows["status_b"])
    table["B/A"] = rows["ratio"]
    table["95% CI of B/A"] = rows.apply(_ci, axis=1)
    table["processes A/B"] = _processes(rows)
    table["verdict"] = rows["verdict"]
    table["A tokens/s"] = rows["tokens_per_s_a"]
    table["B tokens/s"] = rows["tokens_per_s_b"]
    table["A MFU %"] = rows["mfu_a"] * 100
    table["B MFU %"] = rows["mfu_b"] * 100
    table["A peak GiB"] = rows["peak_gib_a"]
    table["B peak GiB"] = rows["peak_gib_b"]
    table["note"] = rows["note"]
    return table.reset_index(drop=True)


def _processes(rows: pd.DataFrame) -> pd.Series:
    """How many fresh processes measured each side, as "2/3"."""
    return pd.Series([
        f"{int(x)}/{int(y)}" if pd.notna(x) and pd.notna(y) and (x or y) else ""
        for x, y in zip(rows.get("processes_a", []), rows.get("processes_b", []), strict=True)
    ], index=rows.index, dtype=object)


def verdict_rule(min_effect: float) -> str:
    """The sentence that says once what the verdicts mean."""
    low, high = V.noise_band(min_effect)
    return (
        f"Verdicts come from the variation between fresh processes: the 95% interval of B/A (a "
        f"hierarchical bootstrap over processes, then steps, widened to Welch's t interval over the "
        f"processes' medians) against the band {low:.3f}–{high:.3f} (minimum effect {min_effect * 100:g}%): "
        f"same when the interval lies inside the band, faster or slower when it lies wholly outside it, "
        f"undecided when it straddles an edge; \"one process\" where a side was measured in a single "
        f"process (a run made before repetition), which cannot show the variation between processes."
    )


def _counts(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts(sort=False)
    order = [v for v in V.VERDICTS if v in counts] + [v for v in counts.index if v not in V.VERDICTS]
    return ", ".join(f"{counts[v]} {v}" for v in order)


def timing_findings(rows: pd.DataFrame, min_effect: float) -> list[str]:
    items = []
    compared = rows[rows["verdict"].isin(V.VERDICTS) & rows["ratio"].notna()]
    study = compared[compared["variant"] == "naive"]
    for pass_name in [p for p in PASS_LABELS if p in set(study["pass"])]:
        part = study[study["pass"] == pass_name]
        median = part["ratio"].median()
        text = (
            f"{PASS_LABELS[pass_name]}: the median ratio B/A over {len(part)} "
            f"configuration{'s' if len(part) != 1 else ''} is {median:.3f} ({_counts(part['verdict'])})"
        )
        flagged = part[part["verdict"].isin([V.FASTER, V.SLOWER])]
        if len(flagged):
            best, worst = part.loc[part["ratio"].idxmin()], part.loc[part["ratio"].idxmax()]
            if best["ratio"] < 1 and best["verdict"] == V.FASTER:
                text += f"; the largest gain is {_config(best)} ({_times(best['ratio'])})"
            if worst["ratio"] > 1 and worst["verdict"] == V.SLOWER:
                text += f"; the largest loss is {_config(worst)} ({_times(worst['ratio'])})"
        items.append(text + ".")
    if study["precision"].nunique() > 1:
        by = study.groupby("precision")["ratio"].median()
        items.append(
            "By precision, the median ratio B/A is " + ", ".join(f"{p} {r:.3f}" for p, r in by.items()) + "."
        )
    for label in ("A", "B"):
        only = rows[rows["verdict"] == f"only in {label}"]
        if len(only):
            names = ", ".join(f"{_config(r)} {r['variant']}" for _, r in only.head(6).iterrows())
            more = f" and {len(only) - 6} more" if len(only) > 6 else ""
            items.append(f"{len(only)} configuration(s) measured only in {label}: {names}{more}.")
    oom = rows[rows["verdict"].str.contains("OOM in A$|OOM in B$", regex=True)]
    for _, row in oom.iterrows():
        items.append(f"{_config(row)} {row['variant']} ran out of memory {row['verdict'][4:]} only.")
    faster_tokens = compared["tokens_ratio"].dropna()
    if len(faster_tokens) and (rows["note"].str.contains("batch")).any():
        items.append(
            f"With different batch sizes, tokens/s is the fair measure: B's is a median "
            f"{faster_tokens.median():.2f}× A's."
        )
    items.append(verdict_rule(min_effect))
    return items


def ratio_figure(rows: pd.DataFrame, min_effect: float, out: Path) -> bool:
    """Ratio B/A with its interval per configuration (sizes x contexts), one panel per pass x precision."""
    rows = rows[(rows["variant"] == "naive") & rows["ratio"].notna()]
    if rows.empty:
        return False
    passes = [p for p in PASS_LABELS if p in set(rows["pass"])]
    precisions = sorted(set(rows["precision"]), key=lambda p: (p != "fp32", p))
    fig, axes = plt.subplots(len(precisions), len(passes), squeeze=False, sharey=True,
                             figsize=(4.2 * len(passes), 3.2 * len(precisions) + 0.4))
    low, high = V.noise_band(min_effect)
    for r, precision in enumerate(precisions):
        for c, pass_name in enumerate(passes):
            ax = axes[r][c]
            part = rows[(rows["pass"] == pass_name) & (rows["precision"] == precision)].reset_index(drop=True)
            ax.axhspan(low, high, color="tab:gray", alpha=0.2, lw=0, label="noise band")
            ax.axhline(1, color="black", lw=0.8)
            for i, row in part.iterrows():
                color = VERDICT_COLORS.get(row["verdict"], "tab:gray")
                if pd.notna(row["ci_low"]):
                    ax.plot([i, i], [row["ci_low"], row["ci_high"]], color=color, lw=1.5)
                ax.plot([i], [row["ratio"]], "o", color=color, label=row["verdict"])
            ax.set_xticks(range(len(part)), [f"{s}\n{int(x)}" for s, x in
                                             zip(part["size"], part["context_length"], strict=True)],
                          fontsize=7)
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_xlim(-0.5, max(len(part), 1) - 0.5)
            ax.set_title(f"{PASS_LABELS[pass_name]}, {precision}", fontsize="small")
            if c == 0:
                ax.set_ylabel("step time B/A (below 1: B faster)")
    handles, labels = {}, {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
            labels[lab] = lab
    fig.legend(list(handles.values()), list(labels), loc="upper center", ncol=len(handles), fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(out)
    plt.close(fig)
    return True


def categories_figure(categories: pd.DataFrame, a: str, b: str, out: Path) -> bool:
    """GPU time per step by kernel category, A beside B, summed over the configurations profiled in both."""
    if categories.empty:
        return False
    passes = [p for p in PASS_LABELS if p in set(categories["pass"])]
    fig, axes = plt.subplots(1, len(passes), squeeze=False, figsize=(5.5 * len(passes), 3.8))
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = categories[categories["pass"] == pass_name]
        sums = part.groupby("category", sort=False)[["ms_a", "ms_b"]].sum()
        x = range(len(sums))
        ax.bar([i - 0.2 for i in x], sums["ms_a"], 0.4, label=f"A: {a}")
        ax.bar([i + 0.2 for i in x], sums["ms_b"], 0.4, label=f"B: {b}")
        ax.set_xticks(list(x), list(sums.index), rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("GPU ms per step (sum over configurations)")
        ax.set_title(PASS_LABELS[pass_name])
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return True


def kernel_findings(categories: pd.DataFrame, configs: pd.DataFrame, min_effect: float) -> list[str]:
    items = []
    if not configs.empty:
        unmatched = configs[configs["presence"] != ""]
        for _, row in unmatched.iterrows():
            items.append(f"Profile {_config(row)}: {row['presence']}.")
    if categories.empty:
        return items
    for pass_name in [p for p in PASS_LABELS if p in set(categories["pass"])]:
        part = categories[categories["pass"] == pass_name]
        sums = part.groupby("category", sort=False)[["ms_a", "ms_b"]].sum()
        sums = sums[(sums["ms_a"] > 0) | (sums["ms_b"] > 0)]
        total_a, total_b = sums["ms_a"].sum(), sums["ms_b"].sum()
        parts = []
        for category, row in sums.sort_values("ms_a", ascending=False).head(4).iterrows():
            if row["ms_a"] == 0:
                parts.append(f"{category} appeared ({row['ms_b']:.3g} ms)")
                continue
            change = row["ms_b"] / row["ms_a"] - 1
            if abs(change) < min_effect:
                parts.append(f"{category} time did not change (within {min_effect * 100:g}%)")
            else:
                parts.append(f"{category} time {'fell' if change < 0 else 'rose'} {abs(change) * 100:.0f}%")
        items.append(
            f"{PASS_LABELS[pass_name].capitalize()}: GPU time per step (summed over the configurations "
            f"profiled in both) went from {total_a:.3g} ms to {total_b:.3g} ms; " + ", ".join(parts) + "."
        )
    return items


def _section_timing(rows, min_effect, figures: Path) -> Section:
    section = Section("timing", "1. End-to-end timing")
    if rows.empty:
        return section.add(Text("Neither run has timing rows."))
    section.add(Text(
        "Each run's steady state (its largest warm-up), matched by size, context length, pass, precision "
        "and variant. B/A is the ratio of median step times (below 1: B is faster), with a 95% bootstrap "
        "interval from the per-step samples; p is the test on the two sets of samples "
        "(lmstudy/analyse/compare/verdict.py)."
    ))
    section.add(Findings(timing_findings(rows, min_effect)))
    study = rows[rows["variant"] == "naive"]
    section.add(Table("Step time, tokens/s, MFU and peak memory, B against A (the study's model)",
                      timing_table(study, variant_column=False), name="timing_step_time"))
    others = rows[rows["variant"] != "naive"]
    if len(others):
        section.add(Table("The other variants (SDPA, compiled)", timing_table(others, variant_column=True),
                          name="timing_other_variants"))
    if ratio_figure(rows, min_effect, figures / "ratio.png"):
        section.add(Figure(figures / "ratio.png",
                           "Step time B/A per configuration with its 95% interval; grey: the noise band."))
    return section


def _section_kernels(a, b, min_effect, figures: Path) -> Section:
    section = Section("nsys", "2. GPU time by kernel category and kernel")
    configs = T.profiled_configurations(a, b)
    if configs.empty:
        return section.add(Text("Neither run has profiles (section 2)."))
    categories = T.kernel_categories(a, b)
    section.add(Text(
        "Per configuration profiled in both runs: GPU time per step by kernel category (the rules of "
        "lmstudy/analyse/nsys/categories.py), and the kernels whose time changed most, appeared or "
        "disappeared. "
        "Profiles keep GPU totals over a few steps of one process; kernel time per category agrees within "
        "1% between processes, so a change inside the minimum-effect band is the same and one beyond it "
        "is faster or slower (a zero change is always the same)."
    ))
    section.add(Findings(kernel_findings(categories, configs, min_effect)))
    listing = configs[configs["presence"] != ""]
    if len(listing):
        listing = listing[[*T.PROFILE_KEY, "presence"]].rename(
            columns={"presence": "state", "context_length": "context"})
        listing["pass"] = listing["pass"].map(PASS_LABELS)
        section.add(Table("Profiles in one run only, or not ok in one", listing, name="nsys_unmatched"))
    if not categories.empty:
        table = categories.rename(
            columns={"context_length": "context", "ms_a": "A ms/step", "ms_b": "B ms/step"})
        table["pass"] = table["pass"].map(PASS_LABELS)
        table["change %"] = table.pop("change") * 100
        section.add(Table("GPU time per step by kernel category", table, name="nsys_categories"))
        if categories_figure(categories, a.name, b.name, figures / "categories.png"):
            caption = "GPU time per step by kernel category, A beside B."
            section.add(Figure(figures / "categories.png", caption))
    top = T.top_kernel_changes(a, b, min_effect=min_effect)
    if not top.empty:
        top = top.rename(columns={"context_length": "context", "ms_a": "A ms/step", "ms_b": "B ms/step",
                                  "delta_ms": "B−A ms/step"})
        top["pass"] = top["pass"].map(PASS_LABELS)
        caption = "Kernels that changed most per configuration (appeared, disappeared, faster, slower)"
        section.add(Table(caption, top, name="nsys_top_kernels"))
    return section


def _section_memory(a, b) -> Section:
    section = Section("memory", "4. Memory peaks")
    peaks, kinds = T.memory(a, b)
    if peaks.empty:
        return section.add(Text("Neither run has memory snapshots (section 4)."))
    measured = peaks[peaks["presence"] == ""]
    items = []
    if len(measured):
        items.append(
            f"B's peak is a median {measured['ratio'].median():.3f}× A's over {len(measured)} snapshot(s) "
            f"(from {measured['ratio'].min():.3f}× to {measured['ratio'].max():.3f}×)."
        )
    else:
        items.append("No configuration has a snapshot in both runs (" + _counts(peaks["presence"]) + ").")
    section.add(Findings(items))
    table = pd.DataFrame({
        "size": peaks["size"], "context": peaks["context_length"], "pass": peaks["pass"].map(PASS_LABELS),
        "precision": peaks["precision"],
        "A peak GiB": _shown(peaks["peak_gib_a"], peaks["status_a"]),
        "B peak GiB": _shown(peaks["peak_gib_b"], peaks["status_b"]),
        "B/A": peaks["ratio"], "state": peaks["presence"].replace("", "both measured"),
    })
    section.add(Table("Peak allocated memory per snapshot", table, name="memory_peaks"))
    if not kinds.empty:
        shown = kinds.rename(columns={"context_length": "context", "gib_a": "A GiB", "gib_b": "B GiB",
                                      "change_gib": "B−A GiB"})
        shown["pass"] = shown["pass"].map(PASS_LABELS)
        section.add(Table("Memory at the peak by kind", shown, name="memory_kinds"))
    return section


def _summary_table(rows, key_labels: dict) -> pd.DataFrame:
    table = pd.DataFrame({label: rows[column] for column, label in key_labels.items()})
    table["A median ms"] = rows["median_ms_a"]
    table["B median ms"] = rows["median_ms_b"]
    table["B/A"] = rows["ratio"]
    table["95% CI of B/A"] = rows.apply(_ci, axis=1)
    table["processes A/B"] = _processes(rows)
    table["verdict"] = rows["verdict"]
    return table


def _section_attention(a, b, min_effect: float) -> Section:
    section = Section("attention", "5. Attention")
    rows = T.attention(a, b, min_effect)
    if rows.empty:
        return section.add(Text("Neither run has attention results (section 5)."))
    section.add(Text(
        "Forward and backward medians per implementation, precision, head size and sequence length, "
        "with verdicts from the variation between processes (rows of runs that kept no per-process "
        "samples say \"one process\")."
    ))
    compared = rows[rows["verdict"].isin(V.VERDICTS) & rows["ratio"].notna()]
    items = []
    for part_name, part in compared.groupby("part", sort=False):
        items.append(f"Attention {part_name}: B/A median {part['ratio'].median():.3f} over {len(part)} "
                     f"configurations ({_counts(part['verdict'])}).")
    unmatched = rows[~rows["verdict"].isin(V.VERDICTS)]
    if len(unmatched):
        items.append(f"Not compared: {_counts(unmatched['verdict'])} (rows forward and backward).")
    section.add(Findings(items))
    section.add(Table("Attention step times, B against A", _summary_table(rows, {
        "implementation": "implementation", "precision": "precision", "head_dim": "d", "seq_len": "seq",
        "part": "part"}), name="attention_step_times"))
    speedups = T.attention_speedups(a, b)
    if not speedups.empty:
        speedups = speedups.rename(columns={
            "head_dim": "d", "seq_len": "seq", "sdpa_a": "A SDPA ×", "sdpa_b": "B SDPA ×",
            "naive-compile_a": "A compiled ×", "naive-compile_b": "B compiled ×"})
        section.add(Table("Speed-ups over naive eager attention (forward+backward), in each run", speedups,
                          name="attention_speedups"))
    return section


def _section_compile(a, b, min_effect: float) -> Section:
    section = Section("compile", "6. torch.compile")
    rows = T.compile_rows(a, b, min_effect)
    if rows.empty:
        return section.add(Text("Neither run has torch.compile results (section 6)."))
    section.add(Text("Eager and compiled medians per size, precision and pass, with verdicts from the "
                     "variation between processes; compile time is the compiled first step's excess over "
                     "the median."))
    speedups = T.compile_speedups(rows)
    items = []
    if not speedups.empty and {"speedup_a", "speedup_b"} <= set(speedups):
        both = speedups.dropna(subset=["speedup_a", "speedup_b"])
        if len(both):
            items.append("torch.compile's speed-up over eager: a median "
                         f"{both['speedup_a'].median():.2f}× in A, "
                         f"{both['speedup_b'].median():.2f}× in B ({len(both)} configurations).")
    section.add(Findings(items))
    table = _summary_table(rows, {"size": "size", "context_length": "context", "precision": "precision",
                                  "attention": "attention", "pass": "pass", "mode": "mode"})
    table["pass"] = table["pass"].map(PASS_LABELS)
    section.add(Table("Eager and compiled step times, B against A", table, name="compile_step_times"))
    if not speedups.empty:
        shown = speedups.rename(columns={"context_length": "context", "speedup_a": "A speed-up ×",
                                         "speedup_b": "B speed-up ×", "compile_s_a": "A compile s",
                                         "compile_s_b": "B compile s"})
        shown["pass"] = shown["pass"].map(PASS_LABELS)
        section.add(Table("Speed-up of compiled over eager, and compile time, in each run", shown,
                          name="compile_speedups"))
    return section


def _section_ladder(a, b, rows, min_effect: float) -> Section:
    section = Section("ladder", "7. The optimization ladder of the training step")
    if not (a["ladder"].empty and b["ladder"].empty):
        return _section_ladder_table(section, T.ladder_rows(a, b, min_effect))
    # Runs without the ladder's own table: its rungs among the timing variants, if any.
    rungs = T.ladder(rows)
    if rungs.empty:
        return section.add(Text("No size and context has more than one rung of the ladder in either run."))
    items = []
    for rung, part in rungs[rungs["ratio"].notna()].groupby("rung", sort=False):
        items.append(f"{rung}: B/A median {part['ratio'].median():.3f} ({_counts(part['verdict'])}).")
    section.add(Findings(items))
    section.add(Table("Rungs, B against A", pd.DataFrame({
        "size": rungs["size"], "context": rungs["context_length"], "rung": rungs["rung"],
        "A median ms": _shown(rungs["median_ms_a"], rungs["status_a"]),
        "B median ms": _shown(rungs["median_ms_b"], rungs["status_b"]),
        "B/A": rungs["ratio"], "verdict": rungs["verdict"],
        "A × vs fp32": rungs["vs_fp32_a"], "B × vs fp32": rungs["vs_fp32_b"],
    }), name="ladder_rungs"))
    return section


def _section_ladder_table(section: Section, rungs: pd.DataFrame) -> Section:
    """The ladder section's rungs (ladder/ladder.csv) of both runs: step time B/A with its verdict, and
    each run's share of its own matmul rate (which itself differs from GPU to GPU)."""
    items = []
    for size, part in rungs[rungs["ratio"].notna()].groupby("size", sort=False):
        items.append(f"{size}: B/A median {part['ratio'].median():.3f} over {len(part)} rungs "
                     f"({_counts(part['verdict'])}).")
    missing = rungs[~rungs["verdict"].isin(V.VERDICTS) & rungs["ratio"].isna()]
    if len(missing):
        names = ", ".join(
            f"{r['size']} {r['rung_key']} ({r['verdict']})" for _, r in missing.head(6).iterrows()
        )
        items.append(f"{len(missing)} rung(s) not compared: {names}.")
    section.add(Findings(items))
    section.add(Table("Rungs, B against A", pd.DataFrame({
        "size": rungs["size"], "context": rungs["context_length"], "rung": rungs["rung"],
        "A median ms": _shown(rungs["median_ms_a"], rungs["status_a"]),
        "B median ms": _shown(rungs["median_ms_b"], rungs["status_b"]),
        "B/A": rungs["ratio"], "95% CI of B/A": rungs.apply(_ci, axis=1), "verdict": rungs["verdict"],
        "A share of matmul %": rungs["share_a"] * 100, "B share of matmul %": rungs["share_b"] * 100,
    }), name="ladder_rungs"))
    return section


def build(results: Path, a_name: str, b_name: str, figures: Path,
          min_effect: float = V.MIN_EFFECT) -> tuple[list[Section], dict]:
    """The comparison's sections and its header (environments, differences, warnings)."""
    a, b = R.load(results, a_name), R.load(results, b_name)
    figures.mkdir(parents=True, exist_ok=True)
    rows = T.timing(a, b, min_effect, frozenset(R.unfair_sizes(a, b)))
    sections = [
        _section_timing(rows, min_effect, figures),
        _section_kernels(a, b, min_effect, figures),
        _section_memory(a, b),
        _section_attention(a, b, min_effect),
        _section_compile(a, b, min_effect),
        _section_ladder(a, b, rows, min_effect),
    ]
    header = {
        "a": a_name,
        "b": b_name,
        "environments": R.environment_table(a, b),
        "warnings": R.warnings(a, b),
        "min_effect": min_effect,
        "verdict_rule": verdict_rule(min_effect),
    }
    return sections, header


def render_comparison(results: Path, a_name: str, b_name: str, templates: Path, out_dir: Path,
                      min_effect: float = V.MIN_EFFECT) -> None:
    """Write out_dir/index.html, report.md, tables/*.csv and figures/*.png."""
    for stale in ("tables", "figures"):
        shutil.rmtree(out_dir / stale, ignore_errors=True)
    work = out_dir / ".figures"
    shutil.rmtree(work, ignore_errors=True)
    sections, header = build(results, a_name, b_name, work, min_effect)
    header["environment_table"] = header.pop("environments")
    render(sections, {}, templates, out_dir, f"Comparison: {b_name} (B) against {a_name} (A)",
           f"{a_name}_vs_{b_name}", template="compare", **header)
    shutil.rmtree(work, ignore_errors=True)
    tables_dir = out_dir / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    write_text(tables_dir / "environments.csv", header["environment_table"].to_csv(index=False))
    # Each table's own CSV (tables/<section>_<caption>.csv) is written by render(), which names it.
