"""Section 3, mixed precision: accumulation, autocast dtypes, bf16 speed-ups.

The functions that compute its findings (sentences) from its tables: each small one is marked
@finds and returns its findings with the rows behind them (lmstudy.report.finding).
"""

from __future__ import annotations

import re

import pandas as pd

from lmstudy.analyse.trust import trusted
from lmstudy.report.contract import wording
from lmstudy.report.coverage import first_count
from lmstudy.report.finding import Finding, finds, gather, rows_behind, with_used
from lmstudy.report.labels import PASS_LABELS, on_cpu
from lmstudy.sections.precision.tables import PRECISIONS, collapsed_dtypes

_say = wording(__name__)


@finds
def _accumulation_error(frame: pd.DataFrame) -> list[Finding]:
    """The way of accumulating that ends farthest from the exact sum, against the one that ends nearest."""
    by = frame.set_index("method")
    best, worst = by["abs_error"].idxmin(), by["abs_error"].idxmax()
    steps, increment = int(by["steps"].iloc[0]), by["increment"].iloc[0]
    times = by.loc[worst, "abs_error"] / by.loc[best, "abs_error"]
    behind = rows_behind(by.loc[list(dict.fromkeys([worst, best]))], "increment", "steps", "result",
                         "abs_error", "rel_error", key=("method",))
    behind = behind.assign(error_over_best=behind["abs_error"] / by.loc[best, "abs_error"])
    said = {m: {"name": m, **{c: by.loc[m, c] for c in ("result", "abs_error", "rel_error")}}
            for m in (worst, best)}
    return [Finding(_say("accumulation_error", increment=increment, steps=steps, worst=said[worst],
                         best=said[best], times=times), behind)]


@finds
def _fp32_accumulator(frame: pd.DataFrame) -> list[Finding]:
    """fp16 increments into an fp32 accumulator: how much of the error the increment's rounding explains."""
    fp32_acc = frame[(frame["increment_dtype"] == "float16") & (frame["accumulator_dtype"] == "float32")]
    if not len(fp32_acc):
        return []
    increment, steps = frame["increment"].iloc[0], int(frame["steps"].iloc[0])
    stored = fp32_acc["increment_as_stored"].iloc[0]
    drift = abs(stored - increment) * steps
    error = fp32_acc["abs_error"].max()
    same = fp32_acc["result"].nunique() == 1
    behind = rows_behind(fp32_acc, "increment_dtype", "accumulator_dtype", "increment", "increment_as_stored",
                         "steps", "result", "abs_error", key=("method",))
    drift_of = (behind["increment_as_stored"] - behind["increment"]).abs() * behind["steps"]
    behind = behind.assign(rounding_drift=drift_of, drift_share_of_error=drift_of / behind["abs_error"])
    return [Finding(_say("fp32_accumulator", result=fp32_acc["result"].iloc[0], same=same,
                         increment=increment, stored=stored, drift=drift, error=error,
                         share=drift / error * 100), behind)]


def accumulation_findings(frame: pd.DataFrame) -> list[Finding]:
    """(a)'s findings: the largest error against the smallest, and the fp32 accumulator's."""
    return gather(_accumulation_error(frame), _fp32_accumulator(frame))


_DTYPE_COLUMNS = ("precision", "tensor", "dtype", "device", "note")


@finds
def _autocast_dtypes(frame: pd.DataFrame) -> list[Finding]:
    """Per autocast dtype: which of the toy model's tensors were lowered and which stayed float32."""
    items = []
    for precision in PRECISIONS:
        part = frame[frame["precision"] == precision]
        if part.empty:
            continue
        behind = rows_behind(part, *_DTYPE_COLUMNS, key=())
        if (part["dtype"] == "not run").all():
            items.append(Finding(_say("autocast_not_run", precision=precision, note=part["note"].iloc[0]),
                                 behind))
            continue
        kind = part["tensor"].str.split(" ").str[0]
        low = list(dict.fromkeys(part.loc[part["dtype"] != "float32", "tensor"]))
        outputs = [t for t in low if t.startswith("output of ")]
        logits = None
        if "logits" in low and outputs:
            # The logits are the last layer's output, one tensor observed twice: counted once.
            low, logits = [t for t in low if t != "logits"], outputs[-1]
        params = set(part.loc[kind == "parameter", "dtype"])
        grads = set(part.loc[kind == "gradient", "dtype"])
        kept = list(dict.fromkeys(part.loc[(kind == "output") & (part["dtype"] == "float32"), "tensor"]))
        loss = part.loc[part["tensor"] == "loss", "dtype"]
        text = _say("autocast_dtypes", precision=precision,
                    device=part["device"].iloc[0] if "device" in part else None, params=sorted(params),
                    grads=sorted(grads), low=low, logits=logits, kept=kept,
                    loss=loss.iloc[0] if len(loss) else None)
        items.append(Finding(text, behind))
    return items


@finds
def _fp16_against_bf16(frame: pd.DataFrame) -> list[Finding]:
    """Whether fp16 and bf16 autocast lower the same tensors of the toy model."""
    if not {"fp16", "bf16"} <= set(frame["precision"]):
        return []
    wide = frame[frame["tensor"] != "(all)"].pivot_table(
        index="tensor", columns="precision", values="dtype", aggfunc="first"
    )
    wide = wide.dropna() if {"fp16", "bf16"} <= set(wide.columns) else wide.iloc[0:0]
    if not len(wide):
        return []
    lowered = lambda s: s.isin(["float16", "bfloat16"])  # noqa: E731
    differs = lowered(wide["fp16"]) != lowered(wide["bf16"])
    differ = wide[differs]
    behind = pd.DataFrame({"fp16": wide["fp16"], "bf16": wide["bf16"], "lowered_alike": ~differs})
    return [Finding(_say("fp16_against_bf16", differ=list(differ.index)), behind)]


def dtype_findings(frame: pd.DataFrame) -> list[Finding]:
    """(b)'s findings on the toy model: each autocast's dtypes, then the two autocasts against each other."""
    return gather(_autocast_dtypes(frame), _fp16_against_bf16(frame))


_SPEEDUP_COLUMNS = ("fp32", "bf16", "speedup", "speedup_low", "speedup_high", "host_bound", "noisy",
                    "gpu_fp32_ms", "gpu_bf16_ms", "gpu_speedup", "gpu_speedup_low", "gpu_speedup_high")


@finds
def _gpu_speedup(speedups: pd.DataFrame) -> list[Finding]:
    """bf16's speed-up on the GPU (fp32's busy time over bf16's) over every configuration with both:
    the GPU's work does not depend on how fast the host launches it, so no cell is left out."""
    if "gpu_speedup" not in speedups or not speedups["gpu_speedup"].notna().any():
        return []
    rows = speedups.dropna(subset=["gpu_speedup"])
    sizes = []
    for size, part in rows.groupby("size", observed=True, sort=True):
        lo, hi = part["gpu_speedup"].min(), part["gpu_speedup"].max()
        # One number where both ends print alike.
        sizes.append((size, lo, None if f"{lo:.2f}" == f"{hi:.2f}" else hi))
    return [Finding(_say("gpu_speedup", configurations=len(rows), sizes=sizes),
                    rows_behind(rows, *_SPEEDUP_COLUMNS))]


@finds
def _largest_speedup(speedups: pd.DataFrame) -> list[Finding]:
    """The largest bf16 wall-time speed-up over the configurations neither host-bound nor noisy (none:
    says so, and points to the GPU time, which answers it)."""
    labels = PASS_LABELS
    sure = trusted(speedups)
    left_out = len(speedups) - len(sure)
    if sure.empty:
        gpu = "gpu_speedup" in speedups and speedups["gpu_speedup"].notna().any()
        return [Finding(
            _say("none_ranked", configurations=len(speedups), gpu=gpu,
                 cpu=on_cpu(speedups) or speedups.attrs.get("device") == "cpu"),
            rows_behind(speedups, *_SPEEDUP_COLUMNS))]
    best = sure.loc[sure["speedup"].idxmax()]
    return [Finding(
        _say("largest_speedup", slower=not best["speedup"] >= 1, speedup=best["speedup"], size=best["size"],
             context=best["context_length"], step=labels[best["pass"]], ranked=len(sure), left_out=left_out),
        with_used(rows_behind(speedups, *_SPEEDUP_COLUMNS), sure))]


@finds
def _slower_than_fp32(speedups: pd.DataFrame) -> list[Finding]:
    """The trusted configurations where bf16 is slower than fp32 beyond the speed-up's interval."""
    sure = trusted(speedups)
    if sure.empty or "speedup_high" not in sure:
        return []
    slower = sure[sure["speedup_high"] < 1]
    behind = rows_behind(sure, "speedup", "speedup_low", "speedup_high").assign(
        slower_beyond_interval=sure["speedup_high"] < 1)
    return [Finding(_say("slower_than_fp32", slower=len(slower), ranked=len(sure),
                         worst=slower["speedup"].min() if len(slower) else None), behind)]


@finds
def _speedup_by_size(speedups: pd.DataFrame) -> list[Finding]:
    """The median speed-up of each size, over its trusted configurations."""
    sure = trusted(speedups)
    by_size = sure.groupby("size", observed=True)["speedup"].median().dropna()
    if len(by_size) < 2:
        return []
    behind = rows_behind(sure, "speedup").assign(
        median_of_size=sure.groupby("size", observed=True)["speedup"].transform("median"))
    return [Finding(_say("speedup_by_size", by_size=list(by_size.items())), behind)]


def speedup_findings(speedups: pd.DataFrame) -> list[Finding]:
    """bf16 against fp32 where the numbers can say it: cells neither host-bound nor noisy, and "slower"
    only where the whole interval of the speed-up lies below 1."""
    return gather(_gpu_speedup(speedups), _largest_speedup(speedups), _slower_than_fp32(speedups),
                  _speedup_by_size(speedups))


_MODULE = re.compile(r"^output of (?P<path>\S+) \((?P<cls>[^)]+)\)$")


def _modules(kinds: pd.Series) -> str:
    """Module outputs by class: "RMSNorm (layers.*.ln1, ln_final), Linear (lm_head)"."""
    by_class: dict[str, list[str]] = {}
    for kind in kinds:
        match = _MODULE.match(kind)
        if match:
            by_class.setdefault(match["cls"], []).append(match["path"])
    return ", ".join(f"{cls} ({', '.join(paths)})" for cls, paths in by_class.items())


@finds
def model_dtype_findings(frame: pd.DataFrame) -> list[Finding]:
    """One sentence: which of the study model's modules ran in low precision under autocast, which
    stayed fp32, and the dtypes of its parameters, logits, loss and gradients."""
    if frame.empty:
        return []
    model = frame["model"].iloc[0] if "model" in frame else "the model"
    collapsed = collapsed_dtypes(frame)
    ran = [p for p in PRECISIONS if p in set(collapsed["precision"])]
    skipped = [p for p in PRECISIONS if p in set(frame["precision"]) and p not in ran]
    why = [(p, frame.loc[frame["precision"] == p, "note"].iloc[0]) for p in skipped]
    where = {"model": model, **{c: frame[c].iloc[0] for c in ("size", "context_length") if c in frame}}
    not_run = rows_behind(frame[frame["precision"].isin(skipped)], "precision", "tensor", "dtype", "note",
                          key=())
    if not ran:
        return [Finding(_say("model_dtypes", model=model, size=None, context=None, clauses=[], alike=False,
                             skipped=why), not_run.assign(**where))]
    clauses = [(p, _LOW_NAMES[p], _model_clause(collapsed[collapsed["precision"] == p].set_index("kind"), p))
               for p in ran]
    text = _say("model_dtypes", model=model, size=frame["size"].iloc[0],
                context=first_count(frame, "context_length"), clauses=clauses,
                alike=len(ran) == 2 and clauses[0][2] == clauses[1][2], skipped=why)
    behind = collapsed[collapsed["precision"].isin(ran)]
    behind = pd.concat([behind, not_run], ignore_index=True) if len(not_run) else behind
    behind = behind.assign(**where)[[*where, *behind.columns]]
    return [Finding(text, behind)]


def _model_clause(part: pd.DataFrame, precision: str) -> str:
    """One autocast's clause, its low dtype as LOW: the two autocasts say it once when alike."""
    outputs = part[part.index.str.startswith("output of ")]
    other = outputs[~outputs["lowered"] & (outputs["dtype"] != "float32")]
    clause = _say("model_clause", low=_modules(outputs.index[outputs["lowered"]]),
                  kept=_modules(outputs.index[outputs["dtype"] == "float32"]),
                  other=_modules(other.index) if len(other) else None,
                  other_dtypes=list(dict.fromkeys(other["dtype"])),
                  rest=[(kind, part.loc[kind, "dtype"])
                        for kind in ("parameters", "logits", "loss", "gradients") if kind in part.index])
    return re.sub(rf"\b{_LOW_NAMES[precision]}\b", "LOW", clause)


_LOW_NAMES = {"fp16": "float16", "bf16": "bfloat16"}


# Declared in the section's contract, in the report's order: (a), (b) on the toy model and on the
# study's model, (c).
FINDINGS = (
    _accumulation_error, _fp32_accumulator, _autocast_dtypes, _fp16_against_bf16, model_dtype_findings,
    _gpu_speedup, _largest_speedup, _slower_than_fp32, _speedup_by_size,
)
