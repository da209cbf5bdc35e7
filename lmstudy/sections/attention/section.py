"""The attention section, attention alone: tables, figures, memory accounting and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.contract import Comparison, SectionContract
from lmstudy.report.coverage import with_columns
from lmstudy.report.render import Figure, Section, Table, Text
from lmstudy.sections.attention import answers as attention_answers
from lmstudy.sections.attention import compare as attention_compare
from lmstudy.sections.attention.figures import draw_figures
from lmstudy.sections.attention.findings import FINDINGS, findings
from lmstudy.sections.attention.tables import (
    GIB,
    IMPLEMENTATIONS,
    LABELS,
    MIB,
    _config,
    _largest_fit,
    _measured_vs_predicted,
    _smallest_oom,
    accounting_table,
    backend_table,
    compile_table,
    cublas_workspace_bytes,
    main_table,
    memory_fit_table,
    oom_threshold,
    ratio_frame,
)

__all__ = [
    "SECTION",
    "GIB",
    "IMPLEMENTATIONS",
    "LABELS",
    "MIB",
    "_config",
    "_largest_fit",
    "_measured_vs_predicted",
    "_smallest_oom",
    "accounting_table",
    "backend_table",
    "build",
    "compile_table",
    "cublas_workspace_bytes",
    "draw_figures",
    "findings",
    "load",
    "main_table",
    "make_figures",
    "memory_fit_table",
    "oom_threshold",
    "ratio_frame",
]


# The columns the section reads that a run may lack (a CPU records no memory).
RECORDED = ("forward_median_ms", "backward_median_ms", "memory_before_backward_bytes", "peak_bytes",
            "inputs_bytes", "first_call_ms", "sdpa_backend")


def load(results: Path) -> pd.DataFrame:
    frame = SECTION.read(results, "attention")
    if frame.empty:
        return frame
    frame["implementation"] = pd.Categorical(
        frame["implementation"], categories=list(IMPLEMENTATIONS), ordered=True
    )
    frame = with_columns(frame, RECORDED)
    frame["total_ms"] = frame["forward_median_ms"] + frame["backward_median_ms"]
    return frame


def make_figures(results: Path, out_dir: Path) -> None:
    frame = load(results)
    if frame.empty:
        return
    draw_figures(frame, out_dir)


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    first = frame.iloc[0]
    method = SECTION.prose("method", batch=int(first["batch_size"]), steps=int(first["steps"]),
                           warmup=int(first["warmup"]))
    SECTION.opening(section, frame, method, answers=attention_answers.answers(frame),
                    findings=findings(frame))
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
                "Memory in use before the backward vs sequence length; the dotted lines are slopes "
                "∝ seq² and ∝ seq. Where naive compiled keeps the same memory as naive eager, the two "
                "are drawn a little apart (the legend says so).",
                data="attention_time_memory",
            )
        )
    fits = memory_fit_table(frame)
    if not fits.empty:
        section.add(
            Table(
                "Memory in use before the backward fitted as a constant plus a power of the sequence length",
                fits,
                name="attention_memory_fit",
                note="constant + a × seq^k, least squares in relative terms, the constant fitted with k: "
                "a constant left in bends a single log-log slope towards 0.",
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
                _measured_vs_predicted(fit, cublas_workspace_bytes(frame)),
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
                "Speed-up of compiled over eager naive attention (forward+backward), log axis fitted to the "
                "speed-ups; an interval past it is cut at the edge with its value written, hollow where it "
                "holds 1.",
                data="attention_compile",
            )
        )


SECTION = SectionContract(
    name="attention",
    title="Attention",
    measures="Attention alone, naive vs compiled vs SDPA: time and memory against sequence length.",
    products={"attention": "attention/attention.csv"},
    body=body,
    empty="No attention results: the section is switched off or produced no rows.",
    load=load,
    coverage=("head_dims", "seq_lens", "precisions"),
    make_figures=make_figures,
    tables=(main_table, backend_table, compile_table, accounting_table, memory_fit_table),
    findings=FINDINGS,
    answers=attention_answers.answers,
    compare=Comparison(reads=("attention",), build=attention_compare.section,
                       findings=attention_compare.FINDINGS),
)

build = SECTION.build
