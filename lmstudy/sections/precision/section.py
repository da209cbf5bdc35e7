"""The mixed precision section: accumulation, autocast dtypes, bf16 speed-ups."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.model_choice import BUILTIN_NAME
from lmstudy.report.answers import Answers
from lmstudy.report.contract import SectionContract, wording
from lmstudy.report.render import Findings, Section, Table, Text
from lmstudy.sections.precision import answers as precision_answers
from lmstudy.sections.precision.findings import (
    FINDINGS,
    accumulation_findings,
    dtype_findings,
    model_dtype_findings,
    speedup_findings,
)
from lmstudy.sections.precision.tables import (
    PRECISIONS,
    accumulation_table,
    dtype_table,
    model_dtype_table,
)
from lmstudy.sections.timing import section as timing_section

__all__ = [
    "SECTION",
    "PRECISIONS",
    "accumulation_findings",
    "accumulation_table",
    "build",
    "dtype_findings",
    "dtype_table",
    "load",
    "model_dtype_findings",
    "model_dtype_table",
    "model_dtypes_part",
    "speedup_findings",
]


def load(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return SECTION.read(results, "accumulation"), SECTION.read(results, "dtypes")


def load_norms(results: Path) -> pd.DataFrame:
    """The normalisation experiment's rows (precision/norm_errors_<size>.csv, one size per run)."""
    frames = [
        result_files.read_csv(path, missing_ok=True)
        for path in sorted(results.glob(SECTION.products["norm_errors"]))
    ]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


_say = wording(__name__)


def norm_activations(norms: pd.DataFrame, *measured: pd.DataFrame) -> tuple[str, str]:
    """Whose activations the normalisation experiment ran on, and a sentence where that is not the
    model the study measures: the experiment always builds the built-in model (at the timing
    section's first size) and runs its own norms on its activations, whatever model: names."""
    whose = _say("norm_whose", model=BUILTIN_NAME, size=norms["size"].iloc[0] if "size" in norms else None)
    labels = {str(m) for frame in measured if "model" in frame for m in frame["model"].dropna()}
    others = sorted(labels - {BUILTIN_NAME})
    if not others:
        return whose, ""
    # After the method's paragraph, so it starts with its space.
    return whose, " " + _say("not_the_study_model", others=others)


def load_parts(results: Path) -> dict[str, pd.DataFrame]:
    """Each of its experiments' rows, by name; empty where the run has none."""
    accumulation, dtypes = load(results)
    return {"accumulation": accumulation, "dtypes": dtypes,
            "model_dtypes": SECTION.read(results, "model_dtypes"), "norms": load_norms(results)}


def body(section: Section, parts: dict[str, pd.DataFrame], results: Path, figures: Path) -> None:
    accumulation, dtypes, model_dtypes, norms = parts.values()
    timing = timing_section.study_model(timing_section.load(results))
    section.add(Answers(precision_answers.answers(accumulation, dtypes, norms, timing)))
    if not accumulation.empty:
        device = accumulation["device"].iloc[0] if "device" in accumulation else None
        section.add(Text(_say("accumulation_text", device=device)))
        section.add(Findings(accumulation_findings(accumulation)))
        section.add(Table(_say("accumulation_title"), accumulation_table(accumulation),
                          name="precision_accumulation"))
    if not dtypes.empty:
        section.add(Text(SECTION.prose("toy_model")))
        section.add(Findings(dtype_findings(dtypes)))
        section.add(Table(_say("dtypes_title"), dtype_table(dtypes), name="precision_autocast_dtypes"))
    for block in model_dtypes_part(model_dtypes):
        section.add(block)
    if not norms.empty:
        whose, not_the_study_model = norm_activations(norms, timing, model_dtypes)
        section.add(Text(SECTION.prose("norms", whose=whose, not_the_study_model=not_the_study_model)))
        section.add(Table(_say("norm_title"), precision_answers.norm_table(norms),
                          name="precision_norm_errors"))
    _speedups_part(section, timing)


def _speedups_part(section: Section, timing: pd.DataFrame) -> None:
    """(c) from the timing section's rows: the bf16 speed-ups, and fp16's beside them where it ran."""
    if timing.empty:
        section.add(Text(_say("no_timing")))
        return
    speedups = timing_section.speedup_frame(timing)
    if speedups.empty:
        section.add(Text(_say("no_speedups")))
        return
    section.add(Text(_say("speedup_text")))
    section.add(Findings(speedup_findings(speedups)))
    section.add(Table(_say("bf16_title"), timing_section.speedup_table(speedups),
                      name="precision_bf16_speedup"))
    both = precision_answers.low_precision_speedup_table(timing)
    if not both.empty:
        section.add(Table(_say("both_title"), both, name="precision_fp16_bf16_speedup"))


def model_dtypes_part(frame: pd.DataFrame) -> list:
    """(b) on the study's model (precision/model_dtypes.csv): its text, its sentence and its table."""
    if frame.empty:
        return []
    first = frame.iloc[0]
    model = first.get("model", "the study's model")
    depth, context = first.get("depth"), first.get("context_length")
    return [
        Text(SECTION.prose("study_model", model=model, size=first["size"],
                           context=context if pd.notna(context) else "(not recorded in this run)",
                           depth=int(depth) if pd.notna(depth) else None)),
        Findings(model_dtype_findings(frame)),
        Table(_say("model_dtypes_title", model=model), model_dtype_table(frame),
              name="precision_model_dtypes"),
    ]


SECTION = SectionContract(
    name="precision",
    title="Mixed precision",
    measures="Accumulation error, dtypes under autocast (a toy model's and the study model's), RMSNorm "
    "and LayerNorm error in fp16 and bf16 "
    "operation by operation, and bf16 (and fp16) speed-ups.",
    products={
        "accumulation": "precision/accumulation.csv",
        "dtypes": "precision/toy_dtypes.csv",
        "model_dtypes": "precision/model_dtypes.csv",
        "norm_errors": "precision/norm_errors_*.csv",
        "timing": "timing/timing.csv",
    },
    body=body,
    empty="No mixed-precision results: the experiments produced no rows.",
    load=load_parts,
    nothing=lambda parts: all(frame.empty for frame in parts.values()),
    # No make_figures: the speed-up figure belongs to the timing section; this section draws none.
    tables=(accumulation_table, dtype_table, model_dtype_table, precision_answers.norm_table,
            timing_section.speedup_table, precision_answers.low_precision_speedup_table),
    findings=FINDINGS,
    answers=precision_answers.answers,
)

build = SECTION.build
