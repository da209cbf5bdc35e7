"""Section 1, end-to-end timing: tables, figures and findings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse.tables import steady_rows, steady_warmup
from lmstudy.report import coverage
from lmstudy.report.answers import Answers, processes_text
from lmstudy.report.contract import Comparison, SectionContract
from lmstudy.report.render import Figure, Findings, Section, Table, Text
from lmstudy.report.sections import plots
from lmstudy.report.sections.labels import PASS_LABELS, mfu_note, on_cpu, order_sizes
from lmstudy.report.sections.timing import answers as timing_answers
from lmstudy.report.sections.timing import compare as timing_compare
from lmstudy.report.sections.timing.figures import draw_figures
from lmstudy.report.sections.timing.findings import FINDINGS, findings
from lmstudy.report.sections.timing.tables import (
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


def load(results: Path) -> pd.DataFrame:
    frame = SECTION.read(results, "timing")
    if frame.empty:
        return frame
    order_sizes(frame)
    frame["pass"] = pd.Categorical(frame["pass"], categories=list(PASS_LABELS), ordered=True)
    return frame


def marks_text(frame: pd.DataFrame) -> str:
    """What the marks and the intervals mean, with this run's thresholds and one of its rows as the
    example of why two processes give a wide interval."""
    from lmstudy.analyse.trust import thresholds

    limits = thresholds(frame)
    busy = f"{limits['min_gpu_busy']:.0%} (noise.min_gpu_busy)" if "min_gpu_busy" in limits else \
        "the config's noise.min_gpu_busy share"
    spread = f"{limits['max_spread']:.0%} (noise.max_spread)" if "max_spread" in limits else \
        "noise.max_spread"
    text = (
        # A CPU has no GPU busy time: no row is host-bound there, only noisy.
        f"Marks (a marked row is greyed in the HTML): ‡ noisy: the processes' medians spread by more "
        f"than {spread}. The spread is (largest − smallest) / smallest of the fresh processes' medians. "
        "Findings leave marked cells out of wall-time trends and say so. (On a GPU, † marks a host-bound "
        "row as well, one whose GPU busy time decides what the GPU does; this run is on the CPU, which "
        "records none.)"
        if on_cpu(frame) else
        f"Marks (a marked row is greyed in the HTML): † host-bound: the GPU worked for less than {busy} "
        "of the step (its busy time per step, over the median step), so the time measures the host's "
        f"launches and Python and moves from process to process; ‡ noisy: the processes' medians spread "
        f"by more than {spread}. The spread is (largest − smallest) / smallest of the fresh processes' "
        "medians. Findings leave marked cells out of wall-time trends and say so; GPU busy time, which "
        "the host does not move, answers what the GPU does."
    )
    rows = steady_rows(frame)
    pairs = rows[(pd.to_numeric(rows.get("processes"), errors="coerce") == 2) & (rows["status"] == "ok")] \
        if "processes" in rows else rows.iloc[0:0]
    if {"ci_low_ms", "ci_high_ms", "process_spread"} <= set(pairs) and len(pairs):
        half = (pairs["ci_high_ms"] - pairs["ci_low_ms"]) / 2 / pairs["median_ms"]
        example = pairs.loc[(half / pairs["process_spread"].clip(lower=1e-6)).idxmax()]
        text += (
            " Why an interval of two processes is wide: it is at least Student's t interval over their "
            "medians, and with two of them t has one degree of freedom (12.7 where many processes give "
            f"about 2), so two that agree closely still get a wide interval: {example['size']} ctx "
            f"{int(example['context_length'])} {PASS_LABELS.get(str(example['pass']), example['pass'])} "
            f"{example['precision']}'s two processes differ by {example['process_spread'] * 100:.1f}%, its "
            f"interval is {example['ci_low_ms']:.3g}–{example['ci_high_ms']:.3g} ms "
            f"(±{half[example.name] * 100:.0f}%). It says how little two processes can tell, not that "
            "the step varies that much."
        )
    return text


def make_figures(results: Path, out_dir: Path) -> None:
    frame = study_model(load(results))
    if frame.empty:
        return
    draw_figures(frame, out_dir)


def build(results: Path, figures: Path) -> Section:
    section = SECTION.start()
    every_variant = load(results)
    frame = study_model(every_variant)
    if frame.empty:
        return section.add(Text("No timing results: the section is switched off or produced no rows."))
    top = steady_warmup(frame)
    # Rows that were measured: an OOM or not-applicable row's processes are those that tried.
    measured = frame[frame["status"] == "ok"] if "status" in frame else frame
    processes = measured["processes"] if "processes" in measured and not measured.empty else pd.Series([1])
    section.add(Text(
        f"Each measured pass of each configuration ran in {processes_text(processes)} (the config's "
        f"noise.min_processes, more while their medians disagreed), each timing all its "
        f"{top + int(frame['timed_steps'].iloc[0])} steps, synchronizing the device after each, with "
        f"batch {int(frame['batch_size'].iloc[0])}. Warm-up w's row is the window of "
        f"{int(frame['timed_steps'].iloc[0])} steps after the first w: what a fresh process with w "
        f"warm-up steps times. Warm-up 0 is the cold start ("
        + ("" if on_cpu(frame) else "CUDA initialisation, ")
        + f"model build, first steps; not the interpreter's start or the imports). Steady-state numbers "
        f"use {top} warm-up "
        "steps. A median is the median over processes of each one's median; its 95% interval comes from "
        "the variation between processes (a hierarchical bootstrap over processes, then steps, at least "
        "as wide as Student's t interval over the processes' medians). "
        + ("TFLOP/s counts 6N + 12·L·H·Q·T FLOPs per token for a training step (a third for the forward "
           "pass); MFU is n/a on a CPU, which has no datasheet peak here." if on_cpu(frame) else
           "MFU counts 6N + 12·L·H·Q·T FLOPs per token for a training step (a third for the forward pass) "
           "over the GPU's datasheet dense peak for the precision the step ran in (fp32 without TF32: the "
           "CUDA-core peak; with TF32: the TF32 tensor-core peak; bf16: the bf16 tensor-core peak), each "
           "table naming its peak; it is n/a for unknown GPUs.")
    ))
    section.add(Text(marks_text(frame)))
    if left := coverage.not_measured_in("timing", frame, "sizes", "context_lengths", "passes", "precisions"):
        section.add(Text(left))
    section.add(Answers(timing_answers.answers(frame)))
    section.add(Findings(findings(frame)))
    model = timing_answers.model_table(frame)
    if not model.empty:
        section.add(Table("The model of each size", model, name="timing_model"))
    section.add(
        Table(
            f"Step time by size, context and pass (warm-up {top})",
            main_table(frame),
            name="timing_step_time",
            note=mfu_note(frame),
        )
    )
    section.add(
        Figure(
            figures / "latency.png", "Median step time vs context length, per pass.", data="timing_step_time"
        )
    )
    section.add(
        Table(
            "Warm-up effect: mean ± std per warm-up count",
            warmup_table(frame),
            name="timing_warmup",
        )
    )
    section.add(
        Figure(
            figures / "warmup.png",
            "Mean step time relative to steady state, and CV, by warm-up.",
            data="timing_warmup",
        )
    )
    backward = backward_frame(frame)
    if not backward.empty:
        section.add(Table("Backward time per configuration: forward+backward minus forward (warm-up "
                          f"{top})", backward_table(backward), name="timing_backward"))
    speedups = speedup_frame(frame)
    if not speedups.empty:
        caption = "bf16 autocast speed-up over fp32 (fp32 time / bf16 time)"
        section.add(Table(caption, speedup_table(speedups), name="timing_bf16_speedup"))
        section.add(
            Figure(
                figures / "speedup.png",
                "bf16 speed-up over fp32 vs context length.",
                data="timing_bf16_speedup",
            )
        )
    if plots.has_values(frame.get("mfu")):
        section.add(
            Table(
                "Model FLOPs utilization of the training step (%), each precision over its own peak",
                mfu_table(frame),
                name="timing_mfu",
            )
        )
    else:
        gpus = ", ".join(sorted({str(g) for g in frame.get("gpu", pd.Series(dtype=str)).dropna()})) or "n/a"
        section.add(Text(
            f"No MFU: it needs the datasheet peak of a known GPU (lmstudy/hardware.py), and this run "
            f"measured on {gpus}."
        ))
    fit = timing_answers.fit_table(frame)
    if not fit.empty:
        section.add(Table(
            "Configurations near or beyond an 80 GB (or 40 GB) GPU's memory: peak memory reserved from the "
            "device",
            fit,
            name="timing_fit_smaller_gpus",
            note=f"'borderline': within {timing_answers.BORDERLINE:.0%} of the GPU's memory; the CUDA "
                 "context "
            "(about 0.5 GiB) comes on top.",
        ))
    variants = variants_table(every_variant)
    if not variants.empty:
        section.add(
            Table(
                f"Other variants (timing.variants): steady-state median (warm-up {top}) beside the naive "
                "model's",
                variants,
                name="timing_other_variants",
            )
        )
    return section


SECTION = SectionContract(
    name="timing",
    title="1. End-to-end timing",
    measures="End-to-end time of every size × context length × pass × precision, with warm-up effects, "
    "MFU and peak memory.",
    products={"timing": "timing/timing.csv"},
    build=build,
    make_figures=make_figures,
    tables=(timing_answers.model_table, main_table, warmup_table, backward_table, speedup_table, mfu_table,
            timing_answers.fit_table, variants_table),
    figures=("latency.png", "warmup.png", "speedup.png"),
    findings=FINDINGS,
    answers=timing_answers.answers,
    compare=Comparison(reads=("timing",), build=timing_compare.section,
                       findings=timing_compare.FINDINGS),
)
