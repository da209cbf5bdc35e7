"""Section 3, mixed precision: accumulation, autocast dtypes, bf16 speed-ups."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.model_choice import BUILTIN_NAME
from lmstudy.report.answers import Answers
from lmstudy.report.contract import SectionContract
from lmstudy.report.render import Findings, Section, Table, Text
from lmstudy.report.sections import timing as timing_section
from lmstudy.report.sections.precision import answers as precision_answers
from lmstudy.report.sections.precision.findings import (
    FINDINGS,
    accumulation_findings,
    dtype_findings,
    model_dtype_findings,
    speedup_findings,
)
from lmstudy.report.sections.precision.tables import (
    PRECISIONS,
    accumulation_table,
    dtype_table,
    model_dtype_table,
)

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


def norm_activations(norms: pd.DataFrame, *measured: pd.DataFrame) -> tuple[str, str]:
    """Whose activations the normalisation experiment ran on, and a sentence where that is not the
    model the study measures: the experiment always builds the built-in model (at the timing
    section's first size) and runs its own norms on its activations, whatever model: names."""
    size = norms["size"].iloc[0] if "size" in norms else "its first size"
    whose = f"the {BUILTIN_NAME}'s own activations (size {size}, random weights)"
    labels = {str(m) for frame in measured if "model" in frame for m in frame["model"].dropna()}
    others = sorted(labels - {BUILTIN_NAME})
    if not others:
        return whose, ""
    return whose, (f" These are not the activations of the model this study measures ({', '.join(others)}): "
                   "the experiment does not run that model's norm layers, and model: does not change it.")


def build(results: Path, figures: Path) -> Section:
    section = SECTION.start()
    accumulation, dtypes = load(results)
    model_dtypes = SECTION.read(results, "model_dtypes")
    norms = load_norms(results)
    if accumulation.empty and dtypes.empty and model_dtypes.empty and norms.empty:
        return section.add(Text("No mixed-precision results: the experiments produced no rows."))
    timing = timing_section.study_model(timing_section.load(results))
    section.add(Answers(precision_answers.answers(accumulation, dtypes, norms, timing)))
    if not accumulation.empty:
        section.add(
            Text(
                "(a) 0.01 added a thousand times in four ways, on "
                f"{accumulation['device'].iloc[0] if 'device' in accumulation else 'the study device'}."
            )
        )
        section.add(Findings(accumulation_findings(accumulation)))
        section.add(
            Table(
                "Accumulating 0.01 a thousand times (exact: 10)",
                accumulation_table(accumulation),
                name="precision_accumulation",
            )
        )
    if not dtypes.empty:
        section.add(
            Text(
                "(b) A toy model, Linear(in, 10, no bias) -> ReLU -> LayerNorm(10) -> Linear(10, out, "
                "no bias), under autocast: dtypes observed at run time with forward hooks, on the loss "
                "computed inside autocast, and on the gradients after backward."
            )
        )
        section.add(Findings(dtype_findings(dtypes)))
        section.add(
            Table(
                "Dtypes under autocast, as observed",
                dtype_table(dtypes),
                name="precision_autocast_dtypes",
            )
        )
    for block in model_dtypes_part(model_dtypes):
        section.add(block)
    if not norms.empty:
        whose, not_the_study_model = norm_activations(norms, timing, model_dtypes)
        section.add(
            Text(
                "(b) The normalisation layer, measured: RMSNorm and LayerNorm written out as their inner "
                f"operations, run on {whose} with every operation in fp16 or bf16, "
                "with one operation at a time, and as the model computes RMSNorm (fp32 inside); the error "
                "is ||y − y_fp32|| / ||y_fp32|| per token, its mean over tokens. The ×100 columns scale the "
                "activations up 100×: large residual values, where fp16's range matters."
                + not_the_study_model
            )
        )
        section.add(
            Table(
                "Normalisation error against fp32 (mean relative error per token)",
                precision_answers.norm_table(norms),
                name="precision_norm_errors",
            )
        )
    if timing.empty:
        section.add(Text("(c) No bf16 vs fp32 speed-ups: the timing section is switched off or has no rows."))
        return section
    speedups = timing_section.speedup_frame(timing)
    if speedups.empty:
        section.add(
            Text(
                "(c) No bf16 vs fp32 speed-ups: the timing section did not measure both precisions "
                "successfully for any configuration."
            )
        )
        return section
    section.add(
        Text(
            "(c) bf16 autocast speed-up over fp32 (fp32 median step time / bf16 median step time), "
            "from the timing section's steady-state measurements."
        )
    )
    section.add(Findings(speedup_findings(speedups)))
    section.add(
        Table(
            "bf16 autocast speed-up over fp32 (×)",
            timing_section.speedup_table(speedups),
            name="precision_bf16_speedup",
        )
    )
    both = precision_answers.low_precision_speedup_table(timing)
    if not both.empty:
        section.add(
            Table(
                "fp16 and bf16 autocast speed-up over fp32 (×)",
                both,
                name="precision_fp16_bf16_speedup",
            )
        )
    return section


def model_dtypes_part(frame: pd.DataFrame) -> list:
    """(b) on the study's model (precision/model_dtypes.csv): its text, its sentence and its table."""
    if frame.empty:
        return []
    first = frame.iloc[0]
    model = first.get("model", "the study's model")
    depth = first.get("depth")
    return [
        Text(
            f"(b) The same on the study's model, {model}, at its smallest size ({first['size']}) and context "
            f"{first['context_length']}: parameters, each module's output"
            + (f" down to depth {int(depth)} of its module paths" if pd.notna(depth) else "")
            + " (forward hooks; a repeated block's path is shown once, its index as *, with how many "
            "tensors the row stands for), the logits, the study's loss (cross-entropy on the logits "
            "upcast to fp32) and the gradients after backward."
        ),
        Findings(model_dtype_findings(frame)),
        Table(f"Dtypes under autocast in {model}", model_dtype_table(frame), name="precision_model_dtypes"),
    ]


SECTION = SectionContract(
    name="precision",
    title="3. Mixed precision",
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
    build=build,
    # No make_figures: the speed-up figure belongs to the timing section; this section draws none.
    tables=(accumulation_table, dtype_table, model_dtype_table, precision_answers.norm_table,
            timing_section.speedup_table, precision_answers.low_precision_speedup_table),
    findings=FINDINGS,
    answers=precision_answers.answers,
)
