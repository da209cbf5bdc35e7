"""Section 3, mixed precision: accumulation, autocast dtypes, bf16 speed-ups.

The functions that compute its findings (sentences) from its tables: each small one is marked
@finds and returns its findings with the rows behind them (lmstudy.report.finding).
"""

from __future__ import annotations

import re

import pandas as pd

from lmstudy.analyse.trust import trusted
from lmstudy.report.coverage import first_count
from lmstudy.report.finding import Finding, finds, gather, rows_behind, with_used
from lmstudy.report.labels import PASS_LABELS, on_cpu
from lmstudy.sections.precision.tables import PRECISIONS, collapsed_dtypes


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
    return [Finding(
        f"Adding {increment:g} {steps} times: {worst} ends at {by.loc[worst, 'result']:.4f}, off by "
        f"{by.loc[worst, 'abs_error']:.3g} ({by.loc[worst, 'rel_error'] * 100:.2f}%), {times:.0f}× "
        f"the error of {best} ({by.loc[best, 'abs_error']:.2g}).", behind)]


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
    return [Finding(
        f"With an fp32 accumulator the fp16 increments give {fp32_acc['result'].iloc[0]:.4f}"
        + (" whether or not they are upcast first" if same else "")
        + f": {increment:g} is stored in fp16 as {stored:.8f}, which alone accounts for "
        f"{drift:.4f} of its {error:.4f} error ({drift / error * 100:.0f}%): the fp32 sum itself "
        "rounds little, unlike the fp16 one.", behind)]


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
            items.append(Finding(f"{precision} autocast was not run here: {part['note'].iloc[0]}.", behind))
            continue
        kind = part["tensor"].str.split(" ").str[0]
        low = list(dict.fromkeys(part.loc[part["dtype"] != "float32", "tensor"]))
        outputs = [t for t in low if t.startswith("output of ")]
        if "logits" in low and outputs:
            # The logits are the last layer's output, one tensor observed twice: counted once.
            low = [f"{t} (the logits)" if t == outputs[-1] else t for t in low if t != "logits"]
        params = set(part.loc[kind == "parameter", "dtype"])
        grads = set(part.loc[kind == "gradient", "dtype"])
        kept = list(dict.fromkeys(part.loc[(kind == "output") & (part["dtype"] == "float32"), "tensor"]))
        loss = part.loc[part["tensor"] == "loss", "dtype"]
        device = part["device"].iloc[0] if "device" in part else "the device"
        text = (
            f"Under {precision} autocast on {device}: parameters stay {', '.join(sorted(params))} "
            f"and so do their gradients ({', '.join(sorted(grads))}); "
            f"{len(low)} tensors are computed in lower precision ({', '.join(low) or 'none'})"
        )
        text += f"; {', '.join(kept)} stay float32" if kept else "; no layer output stays float32"
        if len(loss):
            text += f"; the loss is {loss.iloc[0]}"
        items.append(Finding(text + ".", behind))
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
    return [Finding(
        "fp16 and bf16 autocast lower the same tensors."
        if differ.empty
        else f"fp16 and bf16 autocast differ on {', '.join(differ.index)}.", behind)]


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
    parts = []
    for size, part in rows.groupby("size", observed=True, sort=True):
        lo, hi = part["gpu_speedup"].min(), part["gpu_speedup"].max()
        parts.append(f"{size} {lo:.2f}×" if f"{lo:.2f}" == f"{hi:.2f}" else f"{size} {lo:.2f}× to {hi:.2f}×")
    return [Finding(
        "On the GPU (fp32's busy time per step over bf16's), bf16 autocast is faster in every one of the "
        f"{len(rows)} configurations: " + "; ".join(parts) + ".",
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
            f"No wall-time bf16 speed-up is ranked: all {len(speedups)} configurations are "
            + ("noisy in fp32 or bf16 (their processes disagree)"
               if on_cpu(speedups) or speedups.attrs.get("device") == "cpu" else
               "host-bound or noisy in fp32 or bf16 (their wall time measures the host's launches, not "
               "the GPU)")
            + ("; the GPU-time speed-up above answers what bf16 changes on the GPU." if gpu else "."),
            rows_behind(speedups, *_SPEEDUP_COLUMNS))]
    best = sure.loc[sure["speedup"].idxmax()]
    # Below 1× no configuration sped up: the best is then the smallest slowdown, and called so.
    named = ("The largest wall-time bf16 speed-up is" if best["speedup"] >= 1
             else "In wall time, bf16 autocast is slower than fp32 in every configuration; the least "
             "slowdown is")
    return [Finding(
        f"{named} {best['speedup']:.2f}× ({best['size']} ctx "
        f"{best['context_length']}, {labels[best['pass']]})"
        + (f", among the {len(sure)} configurations neither host-bound nor noisy ({left_out} left out)"
           if left_out else "") + ".",
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
    return [Finding(
        f"bf16 is slower than fp32 beyond the intervals in {len(slower)} of {len(sure)} of them"
        + (f", the worst {slower['speedup'].min():.2f}×" if len(slower) else "") + ".", behind)]


@finds
def _speedup_by_size(speedups: pd.DataFrame) -> list[Finding]:
    """The median speed-up of each size, over its trusted configurations."""
    sure = trusted(speedups)
    by_size = sure.groupby("size", observed=True)["speedup"].median().dropna()
    if len(by_size) < 2:
        return []
    behind = rows_behind(sure, "speedup").assign(
        median_of_size=sure.groupby("size", observed=True)["speedup"].transform("median"))
    return [Finding(
        "Median wall-time speed-up by size (configurations neither host-bound nor noisy): "
        + ", ".join(f"{s} {v:.2f}×" for s, v in by_size.items()) + ".", behind)]


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
    why = "; ".join(f"{p} autocast was not run ({frame.loc[frame['precision'] == p, 'note'].iloc[0]})"
                    for p in skipped)
    where = {"model": model, **{c: frame[c].iloc[0] for c in ("size", "context_length") if c in frame}}
    not_run = rows_behind(frame[frame["precision"].isin(skipped)], "precision", "tensor", "dtype", "note",
                          key=())
    if not ran:
        return [Finding(f"In {model}, {why}.", not_run.assign(**where))]
    # Each precision's clause with its low dtype as LOW: the two autocasts say it once when alike.
    parts = {}
    for precision in ran:
        part = collapsed[collapsed["precision"] == precision].set_index("kind")
        outputs = part[part.index.str.startswith("output of ")]
        low = _modules(outputs.index[outputs["lowered"]])
        kept = _modules(outputs.index[outputs["dtype"] == "float32"])
        other = outputs[~outputs["lowered"] & (outputs["dtype"] != "float32")]
        text = (f"the outputs of {low or 'no module'} were LOW while those of {kept or 'no module'} "
                "stayed float32")
        if len(other):
            text += f" and those of {_modules(other.index)} {', '.join(dict.fromkeys(other['dtype']))}"
        rest = [f"{name} {part.loc[kind, 'dtype']}" for kind, name in
                (("parameters", "parameters"), ("logits", "logits"), ("loss", "the loss"),
                 ("gradients", "gradients")) if kind in part.index]
        text += "; " + ", ".join(rest) if rest else ""
        parts[precision] = re.sub(rf"\b{_LOW_NAMES[precision]}\b", "LOW", text)
    if len(ran) == 2 and parts["fp16"] == parts["bf16"]:
        body = "under fp16 and bf16 autocast alike, " + parts["bf16"].replace("LOW", "float16 / bfloat16")
    else:
        body = "; ".join(f"under {p} autocast, {parts[p].replace('LOW', _LOW_NAMES[p])}" for p in ran)
    context = first_count(frame, "context_length")
    said = f"size {frame['size'].iloc[0]}, context {context if context != 'n/a' else 'not recorded'}"
    behind = collapsed[collapsed["precision"].isin(ran)]
    behind = pd.concat([behind, not_run], ignore_index=True) if len(not_run) else behind
    behind = behind.assign(**where)[[*where, *behind.columns]]
    return [Finding(f"In {model} ({said}), {body}" + (f"; {why}" if why else "") + ".", behind)]


_LOW_NAMES = {"fp16": "float16", "bf16": "bfloat16"}


# Declared in the section's contract, in the report's order: (a), (b) on the toy model and on the
# study's model, (c).
FINDINGS = (
    _accumulation_error, _fp32_accumulator, _autocast_dtypes, _fp16_against_bf16, model_dtype_findings,
    _gpu_speedup, _largest_speedup, _slower_than_fp32, _speedup_by_size,
)
