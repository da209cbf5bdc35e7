"""Section 2, Nsight Systems: kernel tables, category shares and findings."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lmstudy.analyse import result_files  # noqa: E402
from lmstudy.analyse.nsys import tables as T  # noqa: E402
from lmstudy.analyse.nsys.categories import CATEGORIES  # noqa: E402
from lmstudy.report.render import Figure, Findings, Section, Table, Text  # noqa: E402
from lmstudy.report.sections import plots  # noqa: E402
from lmstudy.report.sections.labels import PASS_LABELS, size_order  # noqa: E402

SHARES_FIGURE = "category_shares.png"


def _read(path: Path) -> pd.DataFrame:
    return result_files.read_csv(path, missing_ok=True)


def load(results: Path) -> dict[str, pd.DataFrame]:
    base = results / "nsys"
    data = {name: _read(base / f"{name}.csv") for name in ("kernels", "ranges", "runs")}
    data["timing"] = _read(results / "timing" / "timing.csv")
    for frame in (data["kernels"], data["ranges"]):
        if not frame.empty:
            frame["range"] = frame["range"].fillna("")
            frame["path"] = frame["path"].fillna("")
            if "phase" in frame:
                frame["phase"] = frame["phase"].fillna("")
    return data


def backend_record(results: Path) -> dict:
    """How the run's profiler was chosen (scripts/nsys_backend.py's answer); {} if absent."""

    path = results / "nsys" / "backend.json"
    return result_files.read_json(path) if path.exists() else {}


def make_figures(results: Path, out_dir: Path) -> None:
    data = load(results)
    shares = T.category_shares(data["kernels"])
    fig_path = out_dir / SHARES_FIGURE
    passes = [p for p in PASS_LABELS if p in set(shares.get("pass", []))]
    if not passes:
        return  # no profile captured a kernel: no empty panel (the section says so)
    fig, axes = plots.subplots(1, len(passes), figsize=(4.4 * len(passes) + 1.8, 3.8))
    order = {s: i for i, s in enumerate(size_order(data["runs"].get("size", [])))}
    colors = plt.get_cmap("tab10").colors
    runs = data["runs"]
    for ax, pass_name in zip(axes[0], passes, strict=False):
        part = shares[shares["pass"] == pass_name].copy()
        # A configuration that ran out of memory keeps its slot, marked OOM (no kernels to share).
        failed = runs[(runs["pass"] == pass_name) & (runs["status"] != "ok")] if "status" in runs else runs
        part = pd.concat(
            [part, failed[["size", "context_length", "pass", "status"]]], ignore_index=True
        ).fillna({c: 0.0 for c in CATEGORIES if c in part})
        part["order"] = part["size"].map(order)
        part = part.sort_values(["order", "context_length"])
        labels = [f"{s}\nctx {c}" for s, c in zip(part["size"], part["context_length"], strict=False)]
        bottom = pd.Series(0.0, index=part.index)
        for color, category in zip(colors, CATEGORIES, strict=False):
            if category not in part:
                continue
            ax.bar(labels, part[category], bottom=bottom, label=category, color=color)
            bottom += part[category]
        if "status" in part:
            for label, status in zip(labels, part["status"], strict=True):
                if isinstance(status, str) and status != "ok":
                    plots.mark_missing(ax, label, 4, status)
        ax.set_title(PASS_LABELS[pass_name])
        ax.set_ylabel(f"share of {words(data['runs'])['time']} (%)")
        ax.set_ylim(0, 100)
        ax.tick_params(axis="x", labelsize=7)
    plots.legend_outside(fig, axes, title="category")
    fig.savefig(fig_path)
    plt.close(fig)


def _pct(x: float) -> str:
    return f"{x:.1f}%"


def _span(low: float, high: float, fmt: str = ".0f") -> str:
    return f"{low:{fmt}}" if f"{low:{fmt}}" == f"{high:{fmt}}" else f"{low:{fmt}}–{high:{fmt}}"


def _a(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def words(runs: pd.DataFrame) -> dict[str, str]:
    """How the section names what it measured: Nsight Systems on a GPU, or torch.profiler (on a
    CPU its operators stand in for kernels, and their time is CPU time, not GPU time)."""
    backends = set(runs["backend"]) if "backend" in runs else set()
    on_cpu = "gpu" in runs and runs["gpu"].astype(str).str.startswith("cpu").any()
    nsys = backends == {"nsys"}
    return {
        "profiler": "Nsight Systems" if nsys else "torch.profiler",
        "short": "nsys" if nsys else "the profiler",
        "column": "nsys" if nsys else "profiler",
        "time": "CPU time" if on_cpu else "GPU time",
        "kernel": "operator" if on_cpu else "kernel",
        "title": (
            "2. Kernel profiles (Nsight Systems)" if nsys
            else "2. Operator profiles on the CPU (torch.profiler)" if on_cpu
            else "2. Kernel profiles (torch.profiler)"
        ),
    }


def findings(data: dict[str, pd.DataFrame]) -> list[str]:
    kernels, runs = data["kernels"], data["runs"]
    said = words(runs)
    items = []
    failed = runs[runs["status"] != "ok"] if not runs.empty else runs
    if len(failed):
        names = ", ".join(f"{r['size']} ctx {r['context_length']} {r['pass']}" for _, r in failed.iterrows())
        items.append(f"{len(failed)} of {len(runs)} configurations ran out of memory ({names}).")
    a = T.forward_time_table(data["ranges"], runs, data["timing"])
    if not a.empty and a["nsys step / timer"].notna().any():
        ratio = a["nsys step / timer"].dropna()
        worst = a.loc[(ratio - 1).abs().idxmax()]
        items.append(
            f"{said['short'].capitalize()}'s per-step {said['time']} is {ratio.min():.2f}× to "
            f"{ratio.max():.2f}× the Python timer's "
            f"median over {len(ratio)} configurations; the largest gap is {worst['size']} ctx "
            f"{worst['context_length']} {worst['pass']} ({worst['nsys step ms']:.3g} ms vs "
            f"{worst['timer step ms']:.3g} ms)."
        )
    if kernels.empty:  # every run out of memory: kernels.csv has no columns, nothing more to find
        return items
    b = T.top_kernels(kernels)
    for phase in T.PHASES:
        part = b[b["phase"] == phase] if not b.empty else b
        if len(part):
            common = part["category"].value_counts()
            items.append(
                f"The top {phase} {said['kernel']} is {_a(common.index[0])} {said['kernel']} in "
                f"{common.iloc[0]} of {len(part)} configurations, taking "
                f"{_span(part['share of phase %'].min(), part['share of phase %'].max())}% "
                f"of {phase} {said['time']}."
            )
    d = T.gemm_share(kernels)
    if {"inference GEMM %", "training GEMM %"} <= set(d.columns):
        both = d.dropna(subset=["inference GEMM %", "training GEMM %"])
        if len(both):
            items.append(
                f"GEMMs take {_pct(both['inference GEMM %'].mean())} of {said['time']} in inference and "
                f"{_pct(both['training GEMM %'].mean())} in a training step (mean over {len(both)} "
                "size × context configurations)."
            )
    e = T.attention_table(kernels)
    if not e.empty and e["time ratio / FLOP ratio"].notna().any():
        top = e.loc[e["time ratio / FLOP ratio"].idxmax()]
        items.append(
            f"Inside attention, softmax takes "
            f"{_span(e['time softmax/matmul'].min(), e['time softmax/matmul'].max(), '.2f')}× the "
            "matmul time while doing "
            f"{_span(e['FLOPs softmax/matmul'].min(), e['FLOPs softmax/matmul'].max(), '.3f')}× their "
            f"FLOPs: per FLOP it is up to {top['time ratio / FLOP ratio']:.0f}× slower "
            f"({top['size']} ctx {top['context_length']})."
        )
    adopted = T.adopted_share(kernels)
    if not adopted.empty and adopted["adopted_ns"].sum() > 0:
        items.append(
            "Autograd's own thread launched "
            f"{_span(adopted['adopted % of backward'].min(), adopted['adopted % of backward'].max())}% "
            f"of the backward pass's {said['time']}; "
            "those kernels are attributed to the backward range."
        )
    return items


def _with_status(table: pd.DataFrame, column: str = "nsys") -> pd.DataFrame:
    """Show OOM or a missing timer number as such, not as an empty cell; name the profiler's
    columns after the one that ran (`column`)."""
    table = table.copy()
    for col in ("nsys forward ms", "nsys forward kernels ms", "nsys step ms"):
        table[col] = table[col].astype(object).where(table["status"] == "ok", table["status"])
    table["timer step ms"] = (
        table["timer step ms"].astype(object).where(table["timer step ms"].notna(), "not measured")
    )
    named = {c: c.replace("nsys ", f"{column} ", 1) for c in table.columns if c.startswith("nsys ")}
    return table.rename(columns={"context_length": "context", **named})


def build(results: Path, figures: Path) -> Section:
    data = load(results)
    runs = data["runs"]
    if runs.empty:
        section = Section("nsys", "2. Kernel profiles")
        return section.add(Text("No profiles: the section is switched off or produced no runs."))
    said = words(runs)
    section = Section("nsys", said["title"])
    first = runs.iloc[0]
    backends = ", ".join(sorted(set(runs["backend"])))
    versions = ", ".join(sorted({str(v) for v in runs.get("nsys_version", pd.Series()).dropna() if str(v)}))
    section.add(
        Text(
            f"Backend: {backends}" + (f" ({versions})" if versions else "") + f". Each configuration ran "
            f"{int(first['warmup_steps'])} warm-up steps outside the capture, then "
            f"{int(first['profiled_steps'])} profiled steps, batch {int(first['batch_size'])}, "
            f"{first['precision']}. A kernel belongs to the innermost NVTX range around the CUDA call that "
            "launched it; kernels that autograd's thread launches during loss.backward() belong to the "
            "`backward` range open on the main thread at that moment. Times are per step. "
            + (
                "On a CPU the operators stand in for kernels, and their time is CPU time."
                if said["kernel"] == "operator" else ""
            )
        )
    )
    chosen = backend_record(results)
    if chosen.get("note"):
        section.add(Text(chosen["note"]))
    section.add(Findings(findings(data)))
    a = T.forward_time_table(data["ranges"], runs, data["timing"])
    section.add(
        Table(
            f"(a) Time per step: {said['profiler']} (the ranges' {said['time']}) vs the Python timer",
            _with_status(a, said["column"]),
            name="nsys_step_time",
        )
    )
    kernels = data["kernels"]
    if kernels.empty:
        return section.add(Text("No kernels were captured."))
    section.add(
        Table(
            "(b) Top kernel of forward, backward and optimizer",
            T.top_kernels(kernels),
            name="nsys_top_kernels",
        )
    )
    c = T.top_non_gemm_forward(kernels)
    if not c.empty:
        section.add(
            Table(
                "(c) Top non-GEMM kernels of the forward pass (inference)",
                c,
                name="nsys_top_non_gemm_forward",
            )
        )
    section.add(
        Table(
            f"(d) GEMM share of {said['time']}, inference vs training step (%)",
            T.gemm_share(kernels),
            name="nsys_gemm_share",
        )
    )
    e = T.attention_table(kernels)
    if not e.empty:
        section.add(
            Table(
                "(e) Attention: softmax vs matmul time per step, next to their FLOP ratio",
                e,
                note=f"FLOPs: 2·B·T²·d_model per matmul, {T.SOFTMAX_FLOPS_PER_ELEMENT}·B·H·T² for softmax.",
                name="nsys_attention",
            )
        )
    section.add(
        Table(
            f"Share of {said['time']} by kernel category (%)",
            T.category_shares(kernels),
            name="nsys_category_shares",
        )
    )
    section.add(
        Figure(
            figures / SHARES_FIGURE,
            f"Share of {said['time']} by kernel category, per size and pass.",
            data="nsys_category_shares",
        )
    )
    return section
