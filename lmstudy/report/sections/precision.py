"""Section 3, mixed precision: accumulation, autocast dtypes, bf16 speed-ups."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmstudy.analyse import result_files
from lmstudy.analyse.computed import computes_table
from lmstudy.report.render import Findings, Section, Table, Text
from lmstudy.report.sections import timing as timing_section
from lmstudy.report.sections.labels import PASS_LABELS

PRECISIONS = ("fp16", "bf16")


def _read(path: Path) -> pd.DataFrame:
    return result_files.read_csv(path, missing_ok=True)


def load(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    folder = results / "precision"
    return _read(folder / "accumulation.csv"), _read(folder / "toy_dtypes.csv")


@computes_table
def accumulation_table(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": frame["method"],
            "accumulator": frame["accumulator_dtype"],
            "increment": frame["increment_dtype"],
            "0.01 as stored": frame["increment_as_stored"].map(lambda v: f"{v:.8f}"),
            "result": frame["result"].map(lambda v: f"{v:.6f}"),
            "absolute error": frame["abs_error"],
            "relative error": frame["rel_error"],
        }
    )


@computes_table
def dtype_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per tensor, one column per autocast dtype; 'not run' with its reason."""
    tensors = list(dict.fromkeys(frame.loc[frame["tensor"] != "(all)", "tensor"]))
    table = pd.DataFrame({"tensor": tensors})
    for precision in PRECISIONS:
        part = frame[frame["precision"] == precision]
        if part.empty:
            continue
        if (part["dtype"] == "not run").all():
            reason = part["note"].iloc[0]
            table[f"{precision} autocast"] = f"not run: {reason}"
        else:
            table[f"{precision} autocast"] = table["tensor"].map(part.set_index("tensor")["dtype"])
    return table


def accumulation_findings(frame: pd.DataFrame) -> list[str]:
    items = []
    by = frame.set_index("method")
    best, worst = by["abs_error"].idxmin(), by["abs_error"].idxmax()
    steps, increment = int(by["steps"].iloc[0]), by["increment"].iloc[0]
    times = by.loc[worst, "abs_error"] / by.loc[best, "abs_error"]
    items.append(
        f"Adding {increment:g} {steps} times: {worst} ends at {by.loc[worst, 'result']:.4f}, off by "
        f"{by.loc[worst, 'abs_error']:.3g} ({by.loc[worst, 'rel_error'] * 100:.2f}%), {times:.0f}× "
        f"the error of {best} ({by.loc[best, 'abs_error']:.2g})."
    )
    fp32_acc = frame[(frame["increment_dtype"] == "float16") & (frame["accumulator_dtype"] == "float32")]
    if len(fp32_acc):
        stored = fp32_acc["increment_as_stored"].iloc[0]
        drift = abs(stored - increment) * steps
        error = fp32_acc["abs_error"].max()
        same = fp32_acc["result"].nunique() == 1
        items.append(
            f"With an fp32 accumulator the fp16 increments give {fp32_acc['result'].iloc[0]:.4f}"
            + (" whether or not they are upcast first" if same else "")
            + f": {increment:g} is stored in fp16 as {stored:.8f}, which alone accounts for "
            f"{drift:.4f} of its {error:.4f} error ({drift / error * 100:.0f}%): the fp32 sum itself "
            "rounds little, unlike the fp16 one."
        )
    return items


def dtype_findings(frame: pd.DataFrame) -> list[str]:
    items = []
    for precision in PRECISIONS:
        part = frame[frame["precision"] == precision]
        if part.empty:
            continue
        if (part["dtype"] == "not run").all():
            items.append(f"{precision} autocast was not run here: {part['note'].iloc[0]}.")
            continue
        kind = part["tensor"].str.split(" ").str[0]
        low = list(dict.fromkeys(part.loc[part["dtype"] != "float32", "tensor"]))
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
        items.append(text + ".")
    if {"fp16", "bf16"} <= set(frame["precision"]):
        wide = frame[frame["tensor"] != "(all)"].pivot_table(
            index="tensor", columns="precision", values="dtype", aggfunc="first"
        )
        wide = wide.dropna() if {"fp16", "bf16"} <= set(wide.columns) else wide.iloc[0:0]
        if len(wide):
            lowered = lambda s: s.isin(["float16", "bfloat16"])  # noqa: E731
            differ = wide[lowered(wide["fp16"]) != lowered(wide["bf16"])]
            items.append(
                "fp16 and bf16 autocast lower the same tensors."
                if differ.empty
                else f"fp16 and bf16 autocast differ on {', '.join(differ.index)}."
            )
    return items


def make_figures(results: Path, out_dir: Path) -> None:
    """The speed-up figure belongs to the timing section; this section draws none."""
    out_dir.mkdir(parents=True, exist_ok=True)


def build(results: Path, figures: Path) -> Section:
    section = Section("precision", "3. Mixed precision")
    accumulation, dtypes = load(results)
    if accumulation.empty and dtypes.empty:
        return section.add(Text("No mixed-precision results: the experiments produced no rows."))
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
    timing = timing_section.study_model(timing_section.load(results))
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
    return section


def speedup_findings(speedups: pd.DataFrame) -> list[str]:
    items = []
    labels = PASS_LABELS
    best = speedups.loc[speedups["speedup"].idxmax()]
    items.append(
        f"The largest bf16 speed-up is {best['speedup']:.2f}× ({best['size']} ctx "
        f"{best['context_length']}, {labels[best['pass']]})."
    )
    slower = speedups[speedups["speedup"] < 1]
    items.append(
        f"bf16 is slower than fp32 in {len(slower)} of {len(speedups)} configurations"
        + (f", the worst {slower['speedup'].min():.2f}×" if len(slower) else "")
        + "."
    )
    by_size = speedups.groupby("size", observed=True)["speedup"].median().dropna()
    if len(by_size) >= 2:
        items.append(
            "Median speed-up by size: " + ", ".join(f"{s} {v:.2f}×" for s, v in by_size.items()) + "."
        )
    return items
