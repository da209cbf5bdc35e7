"""The attention section, attention alone: tables, figures, memory accounting and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.report.contract import Comparison, SectionContract, wording
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


_say = wording(__name__)


def body(section: Section, frame: pd.DataFrame, results: Path, figures: Path) -> None:
    first = frame.iloc[0]
    method = SECTION.prose("method", batch=int(first["batch_size"]), steps=int(first["steps"]),
                           warmup=int(first["warmup"]))
    SECTION.opening(section, frame, method, answers=attention_answers.answers(frame),
                    findings=findings(frame))
    _time_and_memory(section, frame, figures)
    _memory_accounting(section, frame)
    _compiled(section, frame, figures)


def _time_and_memory(section: Section, frame: pd.DataFrame, figures: Path) -> None:
    """The main table and its figures, the memory fits and the SDPA backends."""
    section.add(Table(_say("time_title"), main_table(frame), name="attention_time_memory"))
    section.add(Figure(figures / "time.png", _say("time_caption"), data="attention_time_memory"))
    if (figures / "memory.png").exists():
        section.add(Figure(figures / "memory.png", _say("memory_caption"), data="attention_time_memory"))
    fits = memory_fit_table(frame)
    if not fits.empty:
        section.add(Table(_say("fit_title"), fits, name="attention_memory_fit", note=_say("fit_note")))
    backends = backend_table(frame)
    if not backends.empty:
        section.add(Table(_say("backend_title"), backends, name="attention_sdpa_backend"))


def _memory_accounting(section: Section, frame: pd.DataFrame) -> None:
    """The accounting of the smallest configuration out of memory (or, where none was, of the largest
    that ran), then predicted against measured memory of the largest that fit."""
    oom = _smallest_oom(frame)
    if oom is not None:
        title = _say("oom_accounting_title", implementation=LABELS[oom["implementation"]],
                     precision=oom["precision"], batch=int(oom["batch_size"]), config=_config(oom),
                     before_gib=oom["predicted_before_backward_bytes"] / GIB,
                     peak_gib=oom["predicted_peak_bytes"] / GIB)
        section.add(Table(title, accounting_table(oom), note=_say("oom_accounting_note")))
        fit = _largest_fit(frame, oom["precision"])
    else:
        section.add(Text(_say("no_oom")))
        fit = _largest_fit(frame, frame["precision"].iloc[0])
        if fit is not None:
            title = _say("largest_accounting_title", precision=fit["precision"], config=_config(fit))
            section.add(Table(title, accounting_table(fit)))
    if fit is not None:
        section.add(Table(_say("predicted_title", precision=fit["precision"], config=_config(fit)),
                          _measured_vs_predicted(fit, cublas_workspace_bytes(frame))))


def _compiled(section: Section, frame: pd.DataFrame, figures: Path) -> None:
    """torch.compile of naive attention: its table and figure, where it ran."""
    compiled = compile_table(frame)
    if compiled.empty:
        return
    section.add(Table(_say("compile_title"), compiled, name="attention_compile"))
    section.add(Figure(figures / "compile_speedup.png", _say("compile_caption"), data="attention_compile"))


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
