"""Section 5, attention alone: tables, figures, memory accounting and findings."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.analyse.attention_memory import naive_memory_accounting, predicted_bytes  # noqa: E402
from lmstudy.analyse.computed import computes_table  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import faster  # noqa: E402

IMPLEMENTATIONS = ("naive", "naive-compile", "sdpa")
LABELS = {"naive": "naive eager", "naive-compile": "naive compiled", "sdpa": "SDPA"}
MIB = 2**20
GIB = 2**30


def load(results: Path) -> pd.DataFrame:
    path = results / "attention" / "attention.csv"
    frame = result_files.read_csv(path, missing_ok=True)
    if frame.empty:
        return frame
    frame["implementation"] = pd.Categorical(
        frame["implementation"], categories=list(IMPLEMENTATIONS), ordered=True
    )
    if "sdpa_backend" not in frame:
        frame["sdpa_backend"] = None
    frame["total_ms"] = frame.get("forward_median_ms") + frame.get("backward_median_ms")
    return frame


def _config(row) -> str:
    return f"d={int(row['head_dim'])}, seq {int(row['seq_len'])}"


def _or_status(frame: pd.DataFrame, column: str, scale: float = 1.0) -> pd.Series:
    values = (frame[column] / scale).astype(object) if column in frame else pd.Series(None, frame.index)
    return values.where(frame["status"] == "ok", frame["status"])


@computes_table
def main_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame.copy()
    rows["fwd ms"] = _or_status(rows, "forward_median_ms")
    rows["bwd ms"] = _or_status(rows, "backward_median_ms")
    rows["MiB before bwd"] = _or_status(rows, "memory_before_backward_bytes", MIB)
    values = ["fwd ms", "bwd ms", "MiB before bwd"]
    table = rows.pivot_table(
        index=["precision", "head_dim", "seq_len"],
        columns="implementation",
        values=values,
        aggfunc="first",
        observed=True,
        dropna=False,
    ).dropna(how="all")
    table.columns = [f"{LABELS[impl]} {value}" for value, impl in table.columns]
    ordered = [f"{LABELS[i]} {v}" for i in IMPLEMENTATIONS for v in values if f"{LABELS[i]} {v}" in table]
    table = table[ordered].reset_index()
    return table.rename(columns={"head_dim": "d", "seq_len": "seq"})


@computes_table
def backend_table(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[(frame["implementation"] == "sdpa") & (frame["status"] == "ok")]
    if rows.empty:
        return pd.DataFrame()
    table = rows.pivot_table(
        index=["precision", "head_dim"], columns="seq_len", values="sdpa_backend", aggfunc="first"
    )
    table.columns = [f"seq {s}" for s in table.columns]
    return table.reset_index().rename(columns={"head_dim": "d"})


def ratio_frame(frame: pd.DataFrame, slow: str, fast: str) -> pd.DataFrame:
    """Forward+backward time of `slow` over `fast`, where both ran."""
    ok = frame[frame["status"] == "ok"]
    wide = ok.pivot_table(
        index=["precision", "head_dim", "seq_len"],
        columns="implementation",
        values=["forward_median_ms", "backward_median_ms", "total_ms"],
        aggfunc="first",
        observed=True,
    )
    if ("total_ms", slow) not in wide or ("total_ms", fast) not in wide:
        return pd.DataFrame()
    out = pd.DataFrame(
        {
            "forward": wide[("forward_median_ms", slow)] / wide[("forward_median_ms", fast)],
            "backward": wide[("backward_median_ms", slow)] / wide[("backward_median_ms", fast)],
            "total": wide[("total_ms", slow)] / wide[("total_ms", fast)],
        }
    ).dropna()
    return out.reset_index()


@computes_table
def compile_table(frame: pd.DataFrame) -> pd.DataFrame:
    """naive compiled vs eager: speed-ups and the first call's excess (the compile)."""
    ratios = ratio_frame(frame, "naive", "naive-compile")
    if ratios.empty:
        return ratios
    compiled = frame[(frame["implementation"] == "naive-compile") & (frame["status"] == "ok")]
    excess = compiled.set_index(["precision", "head_dim", "seq_len"])
    excess = (excess["first_call_ms"] - excess["total_ms"]) / 1e3
    ratios = ratios.set_index(["precision", "head_dim", "seq_len"])
    ratios["compile s"] = excess
    ratios = ratios.reset_index().rename(
        columns={
            "head_dim": "d",
            "seq_len": "seq",
            "forward": "forward ×",
            "backward": "backward ×",
            "total": "forward+backward ×",
        }
    )
    return ratios


def _smallest_oom(frame: pd.DataFrame):
    """The smallest OOM configuration of the naive implementations, eager first."""
    for impl in ("naive", "naive-compile"):
        oom = frame[(frame["implementation"] == impl) & (frame["status"] == "OOM")]
        if len(oom):
            return oom.sort_values(["seq_len", "head_dim", "precision"]).iloc[0]
    return None


def _largest_fit(frame: pd.DataFrame, precision: str):
    ok = frame[
        (frame["implementation"] == "naive") & (frame["status"] == "ok") & (frame["precision"] == precision)
    ]
    if ok.empty:
        return None
    return ok.sort_values(["predicted_before_backward_bytes", "seq_len", "head_dim"]).iloc[-1]


@computes_table
def accounting_table(row) -> pd.DataFrame:
    items = naive_memory_accounting(
        int(row["batch_size"]), int(row["seq_len"]), int(row["head_dim"]), row["precision"]
    )
    table = pd.DataFrame(items)
    table["MiB"] = table["bytes"] / MIB
    table["saved for backward"] = table["saved"].map({True: "yes", False: ""})
    return table[["tensor", "shape", "dtype", "held", "saved for backward", "MiB"]]


def _measured_vs_predicted(row) -> pd.DataFrame:
    measured = [row.get("memory_before_backward_bytes"), row.get("peak_bytes")]
    predicted = [row["predicted_before_backward_bytes"], row["predicted_peak_bytes"]]
    return pd.DataFrame(
        {
            "quantity": ["in use before the backward", "peak (forward and backward)"],
            "predicted MiB": [p / MIB for p in predicted],
            "measured MiB": [m / MIB if m == m and m is not None else None for m in measured],
        }
    )


def oom_threshold(batch: int, head_dim: int, precision: str, memory_bytes: float) -> int:
    """The smallest power-of-two sequence length whose predicted peak exceeds memory_bytes."""
    seq = 256
    while predicted_bytes(batch, seq, head_dim, precision)["peak"] <= memory_bytes:
        seq *= 2
    return seq


def findings(frame: pd.DataFrame) -> list[str]:
    items = []
    ok = frame[frame["status"] == "ok"]
    oom = frame[frame["status"] == "OOM"]
    if len(oom):
        for impl, part in oom.groupby("implementation", observed=True):
            first = part.sort_values(["seq_len", "head_dim"]).iloc[0]
            items.append(
                f"{LABELS[impl]} ran out of memory in {len(part)} of "
                f"{int((frame['implementation'] == impl).sum())} configurations, "
                f"the smallest at {_config(first)} ({first['precision']})."
            )
    else:
        items.append(f"No configuration ran out of memory ({len(frame)} measured).")
    sdpa = ok[ok["implementation"] == "sdpa"]
    for precision, part in sdpa.groupby("precision"):
        backends = ", ".join(sorted(set(part["sdpa_backend"].dropna().astype(str))))
        items.append(f"SDPA in {precision} dispatched to the {backends} backend.")
    for slow, fast, what in (("naive", "sdpa", "SDPA"), ("naive", "naive-compile", "torch.compile")):
        ratios = ratio_frame(frame, slow, fast)
        if ratios.empty:
            continue
        for precision, part in ratios.groupby("precision"):
            top = part.loc[part["total"].idxmax()]
            longest = part[part["seq_len"] == part["seq_len"].max()]
            items.append(
                f"With {what} ({precision}) forward+backward is {faster(part['total'].median())} than "
                f"naive eager attention (median; at best {faster(top['total'])}, {_config(top)}); "
                f"at the longest sequence both ran ({int(longest['seq_len'].iloc[0])}) it is "
                f"{faster(longest['total'].median())} (forward {faster(longest['forward'].median())}, "
                f"backward {faster(longest['backward'].median())})."
            )
    for impl in ("naive", "sdpa"):
        part = ok[(ok["implementation"] == impl)].dropna(subset=["memory_before_backward_bytes"])
        for (precision, d), line in part.groupby(["precision", "head_dim"]):
            line = line.sort_values("seq_len")
            if len(line) < 2 or d != part["head_dim"].max():
                continue
            lo, hi = line.iloc[0], line.iloc[-1]
            growth = hi["memory_before_backward_bytes"] / lo["memory_before_backward_bytes"]
            steps = hi["seq_len"] / lo["seq_len"]
            items.append(
                f"{LABELS[impl]} ({precision}, d={int(d)}): from seq {int(lo['seq_len'])} to "
                f"{int(hi['seq_len'])} ({steps:.0f}× longer) the memory in use before the backward "
                f"grows {growth:.0f}× (to {hi['memory_before_backward_bytes'] / GIB:.2f} GiB): "
                f"an exponent of {math.log(growth) / math.log(steps):.2f} in the sequence length."
            )
    naive = ok[ok["implementation"] == "naive"].dropna(subset=["memory_before_backward_bytes"])
    if len(naive):
        error = naive["memory_before_backward_bytes"] / naive["predicted_before_backward_bytes"] - 1
        items.append(
            f"The accounting from shapes and dtypes predicts the memory in use before the backward of "
            f"naive attention within {error.abs().max() * 100:.1f}% in all {len(naive)} configurations "
            f"that ran (median deviation {error.median() * 100:+.1f}%)."
        )
        memory = naive["device_memory_bytes"].dropna()
        if len(memory):
            d = int(naive["head_dim"].max())
            for precision in sorted(naive["precision"].unique()):
                seq = oom_threshold(int(naive["batch_size"].iloc[0]), d, precision, memory.iloc[0])
                items.append(
                    f"By that accounting naive {precision} attention at batch "
                    f"{int(naive['batch_size'].iloc[0])}, d={d} outgrows the "
                    f"{memory.iloc[0] / GIB:.0f} GiB available from sequence length {seq} "
                    f"(power of two) on."
                )
    compiled = compile_table(frame)
    if not compiled.empty and compiled["compile s"].notna().any():
        items.append(
            f"Compiling naive attention costs {compiled['compile s'].median():.1f} s per shape "
            f"(median; {compiled['compile s'].min():.1f} to {compiled['compile s'].max():.1f} s), "
            "paid on the first call."
        )
    return items


def _plot(frame: pd.DataFrame, y: str, ylabel: str, out: Path, scale: float = 1.0) -> None:
    dims = sorted(frame["head_dim"].unique())
    fig, axes = plots.subplots(1, len(dims), figsize=(3.4 * len(dims) + 2.0, 3.4), sharey=True)
    markers = {"naive": "o", "naive-compile": "s", "sdpa": "^"}
    for ax, d in zip(axes[0], dims, strict=True):
        if not plots.has_values(frame[frame["head_dim"] == d][y]):
            # Every configuration of this head size ran out of memory: say so, no empty axes.
            ax.text(0.5, 0.5, "out of memory\nat every length", ha="center", va="center",
                    transform=ax.transAxes, color="0.3")
            ax.set_title(f"d = {int(d)}")
            ax.set_xticks([])
            continue
        part = frame[frame["head_dim"] == d]
        for (impl, precision), line in part.groupby(["implementation", "precision"], observed=True):
            line = line.sort_values("seq_len")
            good = line[line["status"] == "ok"]
            style = "-" if precision == "fp32" else "--"
            drawn = ax.plot(
                good["seq_len"],
                good[y] / scale,
                style,
                marker=markers[impl],
                label=f"{LABELS[impl]} {precision}",
            )
            bad = line[line["status"] != "ok"]
            if len(bad):
                color = drawn[0].get_color()
                top = frame[y].max() / scale * 1.6 if frame[y].notna().any() else 1.0
                for seq, status in zip(bad["seq_len"], bad["status"], strict=True):
                    plots.mark_missing(ax, seq, top, status, color)
        plots.power_of_two_ticks(ax, part["seq_len"])
        plots.plain_log(ax, "y")
        ax.set_title(f"d = {int(d)}")
        ax.set_xlabel("sequence length")
    axes[0][0].set_ylabel(ylabel)
    plots.legend_outside(fig, axes)
    fig.savefig(out)
    plt.close(fig)


def make_figures(results: Path, out_dir: Path) -> None:
    frame = load(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    if frame.empty:
        return
    _plot(frame, "total_ms", "forward + backward median (ms)", out_dir / "time.png")
    if frame.get("memory_before_backward_bytes", pd.Series(dtype=float)).notna().any():
        _plot(
            frame,
            "memory_before_backward_bytes",
            "in use before backward (MiB)",
            out_dir / "memory.png",
            scale=MIB,
        )
    ratios = ratio_frame(frame, "naive", "naive-compile")
    if not ratios.empty:
        fig, axes = plots.subplots(figsize=(6.2, 3.4))
        ax = axes[0][0]
        for (precision, d), line in ratios.groupby(["precision", "head_dim"]):
            line = line.sort_values("seq_len")
            ax.plot(
                line["seq_len"],
                line["total"],
                "-" if precision == "fp32" else "--",
                marker="o",
                label=f"d={int(d)} {precision}",
            )
        plots.reference_line(ax, label="eager (1.0×)")
        plots.power_of_two_ticks(ax, ratios["seq_len"])
        ax.set_xlabel("sequence length")
        ax.set_ylabel("naive eager / compiled time (×)")
        plots.legend_outside(fig, axes)
        fig.savefig(out_dir / "compile_speedup.png")
        plt.close(fig)


def build(results: Path, figures: Path) -> Section:
    section = Section("attention", "5. Attention")
    frame = load(results)
    if frame.empty:
        return section.add(Text("No attention results: the section is switched off or produced no rows."))
    first = frame.iloc[0]
    section.add(
        Text(
            f"Causal attention alone: batch {int(first['batch_size'])}, one head, q, k, v of shape "
            f"batch x 1 x seq x d. Each configuration ran {int(first['steps'])} timed forwards and "
            f"{int(first['steps'])} timed backwards (a fresh forward before each, untimed) after "
            f"{int(first['warmup'])} warm-up steps, synchronizing the device around each. Memory is what "
            "the caching allocator reports (n/a on a CPU). Times are medians."
        )
    )
    section.add(Findings(findings(frame)))
    section.add(
        Table(
            "Forward and backward time and memory before the backward",
            main_table(frame),
            name="attention_time_memory",
        )
    )
    section.add(
        Figure(
            figures / "time.png",
            "Forward+backward time vs sequence length, per head size.",
            data="attention_time_memory",
        )
    )
    if (figures / "memory.png").exists():
        section.add(
            Figure(
                figures / "memory.png",
                "Memory in use before the backward vs sequence length.",
                data="attention_time_memory",
            )
        )
    backends = backend_table(frame)
    if not backends.empty:
        section.add(Table("The backend SDPA dispatched to", backends, name="attention_sdpa_backend"))
    oom = _smallest_oom(frame)
    if oom is not None:
        section.add(
            Table(
                "Memory accounting of the smallest configuration that ran out of memory: "
                f"{LABELS[oom['implementation']]} {oom['precision']}, "
                f"batch {int(oom['batch_size'])}, {_config(oom)} "
                f"(in use before backward {oom['predicted_before_backward_bytes'] / GIB:.2f} GiB, "
                f"peak {oom['predicted_peak_bytes'] / GIB:.2f} GiB predicted)",
                accounting_table(oom),
                note="From shapes and dtypes of eager naive attention.",
            )
        )
        fit = _largest_fit(frame, oom["precision"])
    else:
        section.add(
            Text(
                "No naive configuration ran out of memory; the accounting below is of the "
                "largest one that ran."
            )
        )
        fit = _largest_fit(frame, frame["precision"].iloc[0])
        if fit is not None:
            section.add(
                Table(
                    f"Memory accounting of naive attention, {fit['precision']}, {_config(fit)}",
                    accounting_table(fit),
                )
            )
    if fit is not None:
        section.add(
            Table(
                f"Predicted vs measured memory of the largest naive {fit['precision']} configuration that "
                f"fit ({_config(fit)})",
                _measured_vs_predicted(fit),
            )
        )
    compiled = compile_table(frame)
    if not compiled.empty:
        section.add(
            Table(
                "torch.compile of naive attention: speed-up over eager and compile time",
                compiled,
                name="attention_compile",
            )
        )
        section.add(
            Figure(
                figures / "compile_speedup.png",
                "Speed-up of compiled over eager naive attention (forward+backward).",
                data="attention_compile",
            )
        )
    return section
