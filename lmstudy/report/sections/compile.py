"""Section 6, the whole model under torch.compile: tables, figures and findings."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.analyse.computed import computes_table  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS, faster, order_sizes  # noqa: E402

KEY = ["size", "precision", "attention", "pass"]


def load(results: Path) -> pd.DataFrame:
    path = results / "compile" / "compile.csv"
    frame = result_files.read_csv(path, missing_ok=True)
    if frame.empty:
        return frame
    return order_sizes(frame)


def comparison(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per size x precision x attention x pass: eager vs compiled."""
    eager = frame[frame["mode"] == "eager"].set_index(KEY)
    compiled = frame[frame["mode"] == "compiled"].set_index(KEY)
    out = pd.DataFrame(index=eager.index.union(compiled.index))
    for name, part in (("eager", eager), ("compiled", compiled)):
        out[f"{name}_status"] = part["status"]
        out[f"{name}_ms"] = part["median_ms"].where(part["status"] == "ok")
        out[f"{name}_first_excess_s"] = part["first_step_excess_s"].where(part["status"] == "ok")
    out["speedup"] = out["eager_ms"] / out["compiled_ms"]
    out["compile_s"] = out["compiled_first_excess_s"]
    saved_ms = out["eager_ms"] - out["compiled_ms"]
    # Steps after which the compile has paid for itself (none if compiled is not faster).
    out["break_even_steps"] = (out["compile_s"] * 1e3 / saved_ms).where(saved_ms > 0)
    return out.reset_index()


@computes_table
def comparison_table(comp: pd.DataFrame) -> pd.DataFrame:
    def shown(ms, status):
        return ms.astype(object).where(status == "ok", status)

    return pd.DataFrame(
        {
            "size": comp["size"],
            "precision": comp["precision"],
            "attention": comp["attention"],
            "pass": comp["pass"].map(PASS_LABELS),
            "eager ms": shown(comp["eager_ms"], comp["eager_status"]),
            "compiled ms": shown(comp["compiled_ms"], comp["compiled_status"]),
            "speed-up ×": comp["speedup"],
            "compile s": comp["compile_s"],
            "eager first-step excess s": comp["eager_first_excess_s"],
            "break-even steps": comp["break_even_steps"],
        }
    )


def findings(frame: pd.DataFrame) -> list[str]:
    items = []
    oom = frame[frame["status"] == "OOM"]
    if len(oom):
        names = sorted(
            {f"{r['size']} {r['precision']} {r['mode']} {PASS_LABELS[r['pass']]}" for _, r in oom.iterrows()}
        )
        items.append(f"{len(oom)} measurement(s) ran out of memory: {', '.join(names)}.")
    comp = comparison(frame).dropna(subset=["speedup"])
    for pass_name, part in comp.groupby("pass"):
        lo, hi = part.loc[part["speedup"].idxmin()], part.loc[part["speedup"].idxmax()]
        spread = (
            f"; from {faster(lo['speedup'])} ({lo['size']} {lo['precision']}) to "
            f"{faster(hi['speedup'])} ({hi['size']} {hi['precision']})"
            if len(part) > 1
            else f" ({lo['size']} {lo['precision']})"
        )
        if len(part) > 1:
            items.append(
                f"Compiled, the {PASS_LABELS[pass_name]} is {faster(part['speedup'].median())} than eager "
                f"(median of {len(part)} configurations){spread}."
            )
        else:
            name = PASS_LABELS[pass_name]
            items.append(f"Compiled, the {name} is {faster(lo['speedup'])} than eager{spread}.")
    if comp["compile_s"].notna().any():
        top = comp.loc[comp["compile_s"].idxmax()]
        items.append(
            f"Compiling costs {comp['compile_s'].median():.1f} s (median) on the first step, up to "
            f"{top['compile_s']:.1f} s ({top['size']} {top['precision']} {PASS_LABELS[top['pass']]})."
        )
    paid = comp["break_even_steps"].dropna()
    if len(paid):
        items.append(
            f"Where compiling helps, it pays for itself after {paid.median():.0f} steps (median; "
            f"{paid.min():.0f} to {paid.max():.0f})."
        )
    return items


def make_figures(results: Path, out_dir: Path) -> None:
    frame = load(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    comp = comparison(frame) if not frame.empty else pd.DataFrame()
    if comp.empty or comp["speedup"].isna().all():
        return
    passes = [p for p in PASS_LABELS if p in set(comp["pass"])]
    fig, axes = plots.subplots(1, len(passes), figsize=(3.8 * len(passes) + 1.6, 3.4))
    for ax, pass_name in zip(axes[0], passes, strict=True):
        part = comp[comp["pass"] == pass_name]
        groups = list(part.groupby(["precision", "attention"]))
        sizes = [s for s in part["size"].cat.categories if s in set(part["size"])]
        width = 0.8 / max(len(groups), 1)
        plots.reference_line(ax, label="eager (1.0×)")
        missing = []
        for i, ((precision, attention), g) in enumerate(groups):
            g = g.set_index("size").reindex(sizes)
            x = [j + i * width for j in range(len(sizes))]
            bars = ax.bar(x, g["speedup"].fillna(0), width, label=f"{precision} {attention}")
            for xi, speedup, eager, compiled in zip(
                x, g["speedup"], g["eager_status"], g["compiled_status"], strict=True
            ):
                if speedup != speedup:
                    status = next((s for s in (compiled, eager) if s == s and s != "ok"), "not measured")
                    missing.append((xi, status, bars[0].get_facecolor()))
        ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(sizes))], sizes)
        low, high = ax.get_ylim()
        for xi, status, color in missing:
            plots.mark_missing(ax, xi, low + 0.04 * (high - low), status, color)
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_ylabel("eager / compiled time (×)")
    plots.legend_outside(fig, axes)
    fig.savefig(out_dir / "speedup.png")
    plt.close(fig)


def build(results: Path, figures: Path) -> Section:
    section = Section("compile", "6. torch.compile of the whole model")
    frame = load(results)
    if frame.empty:
        return section.add(Text("No torch.compile results: the section is switched off or produced no rows."))
    first = frame.iloc[0]
    section.add(
        Text(
            f"Each size at context length {int(first['context_length'])}, batch {int(first['batch_size'])}: "
            f"eager, then torch.compile of the model (default mode), from the same weights. The first step "
            f"is timed alone; then {int(first['warmup_steps'])} warm-up and {int(first['timed_steps'])}"
            " timed steps give the steady median. Compile time is the compiled first step's excess over that "
            "median; the eager first step's excess is shown beside it for scale."
        )
    )
    section.add(Findings(findings(frame)))
    section.add(
        Table(
            "Eager vs compiled: median step time, speed-up and compile time",
            comparison_table(comparison(frame)),
            name="compile_eager_vs_compiled",
        )
    )
    if (figures / "speedup.png").exists():
        section.add(
            Figure(
                figures / "speedup.png",
                "Speed-up of torch.compile over eager, per size.",
                data="compile_eager_vs_compiled",
            )
        )
    return section
