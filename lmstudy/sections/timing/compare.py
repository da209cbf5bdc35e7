"""Section 1 in the comparison of two runs: steady-state step times matched by configuration."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from lmstudy.analyse.compare import runs as R  # noqa: E402
from lmstudy.analyse.compare import tables as T  # noqa: E402
from lmstudy.analyse.compare import verdict as V  # noqa: E402
from lmstudy.analyse.compare.runs import Run  # noqa: E402
from lmstudy.analyse.tables import steady_rows  # noqa: E402
from lmstudy.registry import numbered  # noqa: E402
from lmstudy.report import compare_cells as cells  # noqa: E402
from lmstudy.report.answers import count  # noqa: E402
from lmstudy.report.contract import ComparedRuns, wording  # noqa: E402
from lmstudy.report.finding import Finding, finds, gather, rows_behind  # noqa: E402
from lmstudy.report.labels import PASS_LABELS  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402

TIMING_KEY = ["size", "context_length", "pass", "precision", "variant"]


_say = wording(__name__)


def timing(
    a: Run, b: Run, min_effect: float, noise: V.Noise | None = None, unfair_sizes: frozenset = frozenset()
) -> pd.DataFrame:
    """Section 1 (and the variants beyond naive): each run's steady state, matched by TIMING_KEY,
    with a verdict per measure (lmstudy.analyse.compare.tables.judge)."""
    columns = [
        "status",
        "median_ms",
        "step_times_ms",
        "tokens_per_s",
        "mfu",
        "peak_allocated_bytes",
        "batch_size",
        "params",
        *T.GPU_COLUMNS,
    ]
    parts = []
    for run in (a, b):
        frame = run["timing"]
        if "variant" not in frame:
            frame = frame.assign(variant="naive")
        steady = steady_rows(frame)
        parts.append(steady[[*TIMING_KEY, *(c for c in columns if c in steady)]])
    joined = T.join(parts[0], parts[1], TIMING_KEY)
    rows = []
    for _, row in joined.iterrows():
        out = {k: row[k] for k in TIMING_KEY}
        out["status_a"], out["status_b"] = row.get("status_a"), row.get("status_b")
        for side in ("a", "b"):
            ok = row.get(f"status_{side}") == "ok"
            out[f"median_ms_{side}"] = row.get(f"median_ms_{side}") if ok else math.nan
            out[f"tokens_per_s_{side}"] = row.get(f"tokens_per_s_{side}") if ok else math.nan
            out[f"mfu_{side}"] = row.get(f"mfu_{side}") if ok else math.nan
            peak = row.get(f"peak_allocated_bytes_{side}")
            out[f"peak_gib_{side}"] = peak / 2**30 if ok and pd.notna(peak) else math.nan
            out[f"params_{side}"] = row.get(f"params_{side}")
            out.update(T.measures(row, side, "step_times_ms"))
        out["presence"] = T.presence(out["status_a"], out["status_b"])
        notes = []
        batch_a, batch_b = row.get("batch_size_a"), row.get("batch_size_b")
        if pd.notna(batch_a) and pd.notna(batch_b) and batch_a != batch_b:
            notes.append(f"batch {int(batch_a)} vs {int(batch_b)}")
        if str(out["size"]) in unfair_sizes:
            notes.append("other dimensions")
        out["note"] = "; ".join(notes)
        rows.append(out)
    frame = T.judge(pd.DataFrame(rows), min_effect, noise)
    if not frame.empty:
        frame["tokens_ratio"] = frame["tokens_per_s_b"] / frame["tokens_per_s_a"]
    return frame


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
    table["A median ms"] = cells.shown(rows["median_ms_a"], rows["status_a"])
    table["B median ms"] = cells.shown(rows["median_ms_b"], rows["status_b"])
    table["B/A"] = rows["ratio"]
    table["interval of B/A"] = rows.apply(cells.interval, axis=1)
    table["processes A/B"] = cells.processes(rows)
    table["wall verdict"] = rows["verdict"]
    cells.add_measures(table, rows)
    table["A tokens/s"] = rows["tokens_per_s_a"]
    table["B tokens/s"] = rows["tokens_per_s_b"]
    table["A MFU %"] = rows["mfu_a"] * 100
    table["B MFU %"] = rows["mfu_b"] * 100
    table["A peak GiB"] = rows["peak_gib_a"]
    table["B peak GiB"] = rows["peak_gib_b"]
    table["note"] = rows["note"]
    return table.reset_index(drop=True)


_PAIR_COLUMNS = (
    "status_a",
    "status_b",
    "median_ms_a",
    "median_ms_b",
    "ratio",
    "ci_low",
    "ci_high",
    "processes_a",
    "processes_b",
    "verdict",
)


def _compared(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with a verdict on a ratio: those measured in both runs."""
    return rows[rows["verdict"].isin(V.VERDICTS) & rows["ratio"].notna()]


def _extremes(part: pd.DataFrame, verdict: str, ratio: str) -> dict:
    """The largest gain and loss among the rows the measure called faster or slower (none: None), as
    compare.j2's pass_ratios() says them."""
    faster, slower = part[part[verdict] == V.FASTER], part[part[verdict] == V.SLOWER]

    def said(row) -> dict:
        return {"label": cells.config_label(row), "times": cells.times(row[ratio])}

    return {
        "gpu": verdict == "gpu_verdict",
        "gain": said(faster.loc[faster[ratio].idxmin()]) if len(faster) else None,
        "loss": said(slower.loc[slower[ratio].idxmax()]) if len(slower) else None,
    }


_MEASURE_COLUMNS = (
    "gpu_ms_a",
    "gpu_ms_b",
    "gpu_ratio",
    "gpu_ci_low",
    "gpu_ci_high",
    "gpu_verdict",
    "kernels_a",
    "kernels_b",
    "kernels_verdict",
    "host_bound_a",
    "host_bound_b",
    "noisy_a",
    "noisy_b",
    "reading",
)


@finds
def _pass_ratios(rows: pd.DataFrame) -> list[Finding]:
    """Per pass of the study's model: each measure's verdicts, the decided rows' median ratio, and the
    largest gain and loss among the rows called faster or slower (never a ratio its verdict calls noise)."""
    items = []
    study = _compared(rows)
    study = study[study["variant"] == "naive"]
    for pass_name in [p for p in PASS_LABELS if p in set(study["pass"])]:
        part = study[study["pass"] == pass_name]
        extremes = [_extremes(part, "verdict", "ratio")]
        if cells.has_gpu(part):
            extremes.append(_extremes(part, "gpu_verdict", "gpu_ratio"))
        text = _say(
            "pass_ratios",
            step=PASS_LABELS[pass_name],
            configurations=len(part),
            counts=cells.measure_counts(part),
            extremes=extremes,
        )
        items.append(Finding(text, rows_behind(part, *_PAIR_COLUMNS, *_MEASURE_COLUMNS)))
    return items


@finds
def _precision_ratios(rows: pd.DataFrame) -> list[Finding]:
    """The study's model's median wall-time ratio B/A of each precision, over its decided rows, where
    more than one precision was compared."""
    study = _compared(rows)
    study = study[study["variant"] == "naive"]
    if study["precision"].nunique() <= 1:
        return []
    decided = study[study["verdict"].isin(cells.DECIDED)]
    said = [(p, cells.decided_ratio(part)) for p, part in study.groupby("precision")]
    behind = rows_behind(study, *_PAIR_COLUMNS).assign(
        decided=study["verdict"].isin(cells.DECIDED),
        median_of_precision=decided.groupby("precision")["ratio"].transform("median"),
    )
    return [Finding(_say("precision_ratios", ratios=said), behind)]


@finds
def _only_in_one_run(rows: pd.DataFrame) -> list[Finding]:
    """The configurations measured in one run only (the first six named)."""
    items = []
    for label in ("A", "B"):
        only = rows[rows["verdict"] == f"only in {label}"]
        if len(only):
            names = [(cells.config_label(r), r["variant"]) for _, r in only.head(6).iterrows()]
            items.append(
                Finding(
                    _say(
                        "only_in_one_run",
                        configurations=count(len(only), "configuration"),
                        run=label,
                        names=names,
                        more=max(len(only) - 6, 0),
                    ),
                    rows_behind(only, "status_a", "status_b", "verdict"),
                )
            )
    return items


@finds
def _out_of_memory_in_one(rows: pd.DataFrame) -> list[Finding]:
    """Each configuration that ran out of memory in one run only (the other measured it)."""
    oom = rows[rows["verdict"].isin(["OOM in A", "OOM in B"])]
    items = []
    for i in range(len(oom)):
        row = oom.iloc[i]
        text = _say(
            "out_of_memory_in_one",
            configuration=cells.config_label(row),
            variant=row["variant"],
            where=row["verdict"].removeprefix("OOM "),
        )
        items.append(Finding(text, rows_behind(oom.iloc[[i]], "status_a", "status_b", "verdict")))
    return items


@finds
def _tokens_per_second(rows: pd.DataFrame) -> list[Finding]:
    """Where the runs' batch sizes differ: B's tokens/s over A's, the fair measure then."""
    compared = _compared(rows)
    # tokens/s is batch over step time: stated only where the step time's verdict decided.
    decided = compared[compared["verdict"].isin(cells.DECIDED)]
    faster_tokens = decided["tokens_ratio"].dropna()
    if not (len(compared) and (rows["note"].str.contains("batch")).any()):
        return []
    behind = rows_behind(compared, "tokens_per_s_a", "tokens_per_s_b", "tokens_ratio", "verdict", "note")
    behind = behind.assign(used=compared.index.isin(faster_tokens.index))
    median = faster_tokens.median() if len(faster_tokens) else None
    return [Finding(_say("tokens_per_second", median=median, configurations=len(faster_tokens)), behind)]


@finds
def _verdict_rule(min_effect: float, gpu_min_effect: float) -> list[Finding]:
    """What the verdicts mean, once: each measure's noise band, as its minimum effect draws it."""
    band = pd.DataFrame(
        [
            {
                "measure": measure,
                "min_effect": effect,
                "band_low": V.noise_band(effect)[0],
                "band_high": V.noise_band(effect)[1],
            }
            for measure, effect in (("wall time", min_effect), ("GPU time", gpu_min_effect))
        ]
    )
    return [Finding(cells.verdict_rule(min_effect, gpu_min_effect), band)]


# Declared in the section's contract (its comparison): each writes one kind of finding with the rows
# of A and B behind it.
FINDINGS = (
    _pass_ratios,
    _precision_ratios,
    _only_in_one_run,
    _out_of_memory_in_one,
    _tokens_per_second,
    _verdict_rule,
)


def timing_findings(rows: pd.DataFrame, min_effect: float, gpu_min_effect: float) -> list[Finding]:
    """Every finding of the comparison's timing section, in the report's order."""
    return gather(
        _pass_ratios(rows),
        _precision_ratios(rows),
        _only_in_one_run(rows),
        _out_of_memory_in_one(rows),
        _tokens_per_second(rows),
        _verdict_rule(min_effect, gpu_min_effect),
    )


def ratio_figure(rows: pd.DataFrame, min_effect: float, out: Path) -> bool:
    """Ratio B/A with its interval per configuration (sizes x contexts), one panel per pass x precision."""
    rows = rows[(rows["variant"] == "naive") & rows["ratio"].notna()]
    if rows.empty:
        return False
    passes = [p for p in PASS_LABELS if p in set(rows["pass"])]
    precisions = sorted(set(rows["precision"]), key=lambda p: (p != "fp32", p))
    fig, axes = plt.subplots(
        len(precisions),
        len(passes),
        squeeze=False,
        sharey=True,
        figsize=(4.2 * len(passes), 3.2 * len(precisions) + 0.4),
    )
    low, high = V.noise_band(min_effect)
    for r, precision in enumerate(precisions):
        for c, pass_name in enumerate(passes):
            ax = axes[r][c]
            part = rows[(rows["pass"] == pass_name) & (rows["precision"] == precision)].reset_index(drop=True)
            ax.axhspan(low, high, color="tab:gray", alpha=0.2, lw=0, label="noise band")
            ax.axhline(1, color="black", lw=0.8)
            for i, row in part.iterrows():
                color = cells.VERDICT_COLORS.get(row["verdict"], "tab:gray")
                if pd.notna(row["ci_low"]):
                    ax.plot([i, i], [row["ci_low"], row["ci_high"]], color=color, lw=1.5)
                ax.plot([i], [row["ratio"]], "o", color=color, label=row["verdict"])
            ax.set_xticks(
                range(len(part)),
                [f"{s}\n{int(x)}" for s, x in zip(part["size"], part["context_length"], strict=True)],
                fontsize=7,
            )
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


def _section_timing(rows, min_effect, figures: Path, gpu_min_effect: float) -> Section:
    section = Section("timing", numbered("timing", "End-to-end timing"))
    if rows.empty:
        return section.add(Text(_say("no_rows")))
    section.add(Text(_say("opening", rule=cells.verdict_rule(min_effect, gpu_min_effect))))
    section.add(Findings(timing_findings(rows, min_effect, gpu_min_effect)))
    study = rows[rows["variant"] == "naive"]
    section.add(
        Table(_say("step_time_title"), timing_table(study, variant_column=False), name="timing_step_time")
    )
    others = rows[rows["variant"] != "naive"]
    if len(others):
        section.add(
            Table(
                _say("other_variants_title"),
                timing_table(others, variant_column=True),
                name="timing_other_variants",
            )
        )
    if ratio_figure(rows, min_effect, figures / "ratio.png"):
        section.add(Figure(figures / "ratio.png", _say("ratio_caption")))
    return section


def matched(runs: ComparedRuns) -> pd.DataFrame:
    """The timing rows of A and B matched by configuration, computed once per comparison."""
    unfair = frozenset(R.unfair_sizes(runs.a, runs.b))
    return runs.once("timing", lambda: timing(runs.a, runs.b, runs.min_effect, runs.noise, unfair))


def section(runs: ComparedRuns) -> Section:
    return _section_timing(matched(runs), runs.min_effect, runs.figures, runs.noise.gpu_min_effect)
