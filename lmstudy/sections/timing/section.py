"""The end-to-end timing section: tables, figures and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse.tables import steady_rows, steady_warmup
from lmstudy.report.answers import processes_text
from lmstudy.report.contract import Comparison, SectionContract, wording
from lmstudy.report.coverage import column, first_count, name_absent
from lmstudy.report.labels import PASS_LABELS, mfu_note, on_cpu, order_sizes
from lmstudy.report.render import Figure, Section, Table, Text
from lmstudy.sections import plots
from lmstudy.sections.timing import answers as timing_answers
from lmstudy.sections.timing import compare as timing_compare
from lmstudy.sections.timing.figures import draw_figures
from lmstudy.sections.timing.findings import FINDINGS, findings
from lmstudy.sections.timing.tables import (
    KEY,
    backward_frame,
    backward_table,
    main_table,
    mfu_table,
    speedup_frame,
    speedup_table,
    study_model,
    variants_table,
    warmup_table,
)

__all__ = [
    "SECTION",
    "KEY",
    "build",
    "draw_figures",
    "findings",
    "load",
    "main_table",
    "make_figures",
    "mfu_table",
    "speedup_frame",
    "speedup_table",
    "study_model",
    "variants_table",
    "warmup_table",
]


# The settings the method paragraph states that a run may lack (an older run's): shown as n/a, named as
# not recorded.
RECORDED = ("timed_steps", "batch_size", "processes")


def load(results: Path) -> pd.DataFrame:
    frame = SECTION.read(results, "timing")
    if frame.empty:
        return frame
    order_sizes(frame)
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(PASS_LABELS), ordered=True)
    return name_absent(frame, RECORDED)


def marks_text(frame: pd.DataFrame) -> str:
    """What the marks and the intervals mean, with this run's thresholds and one of its rows as the
    example of why two processes give a wide interval."""
    from lmstudy.analyse.trust import thresholds

    limits = thresholds(frame)
    busy = f"{limits['min_gpu_busy']:.0%} (noise.min_gpu_busy)" if "min_gpu_busy" in limits else \
        "the config's noise.min_gpu_busy share"
    spread = f"{limits['max_spread']:.0%} (noise.max_spread)" if "max_spread" in limits else \
        "noise.max_spread"
    rows = steady_rows(frame)
    pairs = rows[(pd.to_numeric(rows.get("processes"), errors="coerce") == 2) & (rows["status"] == "ok")] \
        if "processes" in rows else rows.iloc[0:0]
    example = None
    if "noisy" in pairs:
        # The example is of two processes that agree (not noisy: spread within noise.max_spread), yet get a
        # wide interval: a noisy pair (66% apart, review W1) would contradict the sentence it illustrates.
        pairs = pairs[~pairs["noisy"].fillna(False).astype(bool)]
    if {"ci_low_ms", "ci_high_ms", "process_spread"} <= set(pairs) and len(pairs):
        half = (pairs["ci_high_ms"] - pairs["ci_low_ms"]) / 2 / pairs["median_ms"]
        row = pairs.loc[(half / pairs["process_spread"].clip(lower=1e-6)).idxmax()]
        example = {
            "config": f"{row['size']} ctx {int(row['context_length'])} "
                      f"{PASS_LABELS.get(str(row['pass']), row['pass'])} {row['precision']}",
            "spread": f"{row['process_spread'] * 100:.1f}%",
            "interval": f"{row['ci_low_ms']:.3g}–{row['ci_high_ms']:.3g}",
            "half": f"{half[row.name] * 100:.0f}%",
        }
    return SECTION.prose("marks", spread=spread, busy=busy, on_cpu=on_cpu(frame), example=example)


def make_figures(results: Path, out_dir: Path) -> None:
    frame = study_model(load(results))
    if frame.empty:
        return
    draw_figures(frame, out_dir)


_say = wording(__name__)


def body(section: Section, every_variant: pd.DataFrame, results: Path, figures: Path) -> None:
    frame = study_model(every_variant)
    top = steady_warmup(frame)
    _opening(section, frame, top)
    model = timing_answers.model_table(frame)
    if not model.empty:
        section.add(Table(_say("model_title"), model, name="timing_model"))
    section.add(Table(_say("step_time_title", warmup=top), main_table(frame), name="timing_step_time",
                      note=mfu_note(frame)))
    section.add(Figure(figures / "latency.png", _say("latency_caption"), data="timing_step_time"))
    warmup = warmup_table(frame)
    # Windows that share no step where the run kept each step, else each warm-up's window, which overlap.
    disjoint = "step 1 ms" in warmup
    section.add(Table(_say("warmup_title", disjoint=disjoint), warmup, name="timing_warmup"))
    section.add(Figure(figures / "warmup.png", _say("warmup_caption", disjoint=disjoint),
                       data="timing_warmup"))
    backward = backward_frame(frame)
    if not backward.empty:
        section.add(Table(_say("backward_title", warmup=top), backward_table(backward),
                          name="timing_backward"))
    _speedups(section, frame, figures)
    _mfu(section, frame)
    fit = timing_answers.fit_table(frame)
    if not fit.empty:
        section.add(Table(_say("fit_title"), fit, name="timing_fit_smaller_gpus",
                          note=_say("fit_note", borderline=timing_answers.BORDERLINE)))
    variants = variants_table(every_variant)
    if not variants.empty:
        section.add(Table(_say("variants_title", warmup=top), variants, name="timing_other_variants"))


def _opening(section: Section, frame: pd.DataFrame, top: int) -> None:
    """The method paragraph, the marks, the answers and the findings."""
    # Rows that were measured: an OOM or not-applicable row's processes are those that tried.
    measured = frame[frame["status"] == "ok"] if "status" in frame else frame
    # A run without the column recorded no count: processes_text says so.
    processes = column(measured, "processes") if not measured.empty else pd.Series([1])
    timed = first_count(frame, "timed_steps")
    method = SECTION.prose("method", processes=processes_text(processes),
                           steps=top + timed if timed != "n/a" else timed, timed=timed,
                           batch=first_count(frame, "batch_size"), warmup=top, on_cpu=on_cpu(frame))
    SECTION.opening(section, frame, method, marks_text(frame), answers=timing_answers.answers(frame),
                    findings=findings(frame))


def _speedups(section: Section, frame: pd.DataFrame, figures: Path) -> None:
    speedups = speedup_frame(frame)
    if not speedups.empty:
        section.add(Table(_say("speedup_title"), speedup_table(speedups), name="timing_bf16_speedup"))
        section.add(Figure(figures / "speedup.png", _say("speedup_caption"), data="timing_bf16_speedup"))


def _mfu(section: Section, frame: pd.DataFrame) -> None:
    """The MFU table, or why there is none."""
    if plots.has_values(frame.get("mfu")):
        section.add(Table(_say("mfu_title"), mfu_table(frame), name="timing_mfu"))
    else:
        gpus = ", ".join(sorted({str(g) for g in frame.get("gpu", pd.Series(dtype=str)).dropna()})) or "n/a"
        section.add(Text(_say("no_mfu", gpus=gpus)))


SECTION = SectionContract(
    name="timing",
    title="End-to-end timing",
    measures="End-to-end time of every size × context length × pass × precision, with warm-up effects, "
    "MFU and peak memory.",
    products={"timing": "timing/timing.csv"},
    body=body,
    empty="No timing results: the section is switched off or produced no rows.",
    load=load,
    nothing=lambda every_variant: study_model(every_variant).empty,
    coverage=("sizes", "context_lengths", "passes", "precisions"),
    make_figures=make_figures,
    tables=(timing_answers.model_table, main_table, warmup_table, backward_table, speedup_table, mfu_table,
            timing_answers.fit_table, variants_table),
    figures=("latency.png", "warmup.png", "speedup.png"),
    findings=FINDINGS,
    answers=timing_answers.answers,
    compare=Comparison(reads=("timing",), build=timing_compare.section,
                       findings=timing_compare.FINDINGS),
)

build = SECTION.build
