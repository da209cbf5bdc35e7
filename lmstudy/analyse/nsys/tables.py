"""The derived tables of section 2, from the aggregated kernel and range tables.

Every table is per configuration (size, context length, pass) and per step:
totals over the profile divided by its number of profiled steps.
"""

from __future__ import annotations

import json
import statistics

import pandas as pd

from lmstudy.analyse.computed import computes_table
from lmstudy.analyse.nsys.categories import CATEGORIES
from lmstudy.analyse.nsys.names import kernel_alias
from lmstudy.analyse.tables import steady_rows
from lmstudy.ranges import ATTENTION_SCORES, FINAL_MATMUL, MODULE_RANGE, PHASES, SOFTMAX

CONFIG = ["size", "context_length", "pass"]
# softmax over one row element: max, subtract, exp, sum, divide.
SOFTMAX_FLOPS_PER_ELEMENT = 5
ATTENTION_MATMUL_RANGES = (ATTENTION_SCORES, FINAL_MATMUL)
SOFTMAX_RANGE = SOFTMAX


def per_step(frame: pd.DataFrame, column: str) -> pd.Series:
    return frame[column] / frame["profiled_steps"]


@computes_table
def forward_time_table(ranges: pd.DataFrame, runs: pd.DataFrame, timing: pd.DataFrame | None) -> pd.DataFrame:
    """(a) nsys's forward time per step next to the timing section's median.

    nsys's numbers are GPU projections of the ranges: from the first kernel
    the range launched starting to the last one ending (idle gaps between
    kernels included), averaged over instances. The timer's number is the
    timing section's steady-state median for the same size, context, pass
    and precision (naive attention); the capture timer's is the median of
    the profiled steps themselves, timed by the profiled program.
    """
    rows = []
    for _, run in runs.iterrows():
        row = {
            "size": run["size"],
            "context_length": run["context_length"],
            "pass": run["pass"],
            "precision": run["precision"],
            "status": run["status"],
        }
        part = (
            ranges[
                (ranges["size"] == run["size"])
                & (ranges["context_length"] == run["context_length"])
                & (ranges["pass"] == run["pass"])
            ]
            if len(ranges)
            else ranges
        )
        for name, label in (("forward", "nsys forward ms"), ("step", "nsys step ms")):
            hit = part[part["range"] == name] if len(part) else part
            row[label] = (hit["gpu_span_ns"].sum() / hit["instances"].sum() / 1e6) if len(hit) else None
            if name == "forward":
                row["nsys forward kernels ms"] = (
                    hit["gpu_ns"].sum() / hit["instances"].sum() / 1e6 if len(hit) else None
                )
        row["timer step ms"] = _timer_ms(timing, run)
        row["capture timer ms"] = _captured_median_ms(run)
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["nsys step / timer"] = table["nsys step ms"] / table["timer step ms"]
    return table.sort_values(CONFIG, kind="stable").reset_index(drop=True)


def _captured_median_ms(run) -> float | None:
    """The Python timer's median over the profiled steps themselves, inside the capture."""
    steps = run.get("captured_step_ms")
    if isinstance(steps, str):
        steps = json.loads(steps) if steps.strip() else []
    if not isinstance(steps, list) or not steps:
        return None
    return float(statistics.median(steps))


def _timer_ms(timing: pd.DataFrame | None, run) -> float | None:
    if timing is None or timing.empty:
        return None
    match = timing[
        (timing["size"].astype(str) == str(run["size"]))
        & (timing["context_length"] == run["context_length"])
        & (timing["pass"].astype(str) == run["pass"])
        & (timing["precision"] == run["precision"])
        & (timing["variant"] == "naive")
        & (timing["status"] == "ok")
    ]
    if match.empty:
        return None
    return float(steady_rows(match)["median_ms"].iloc[0])


@computes_table
def top_kernels(kernels: pd.DataFrame, phases=PHASES) -> pd.DataFrame:
    """(b) The top kernel of each phase: invocations per step and share of the phase."""
    rows = []
    for key, part in kernels.groupby(CONFIG, sort=False):
        for phase in phases:
            inside = part[part["phase"] == phase]
            if inside.empty:
                continue
            by_kernel = (
                inside.groupby(["kernel", "category"])
                .agg(
                    total_ns=("total_ns", "sum"),
                    instances=("instances", "sum"),
                )
                .reset_index()
                .sort_values("total_ns", ascending=False)
            )
            top = by_kernel.iloc[0]
            steps = inside["profiled_steps"].iloc[0]
            rows.append(
                {
                    **dict(zip(CONFIG, key, strict=False)),
                    "phase": phase,
                    "kernel": top["kernel"],
                    "category": top["category"],
                    "invocations per step": top["instances"] / steps,
                    "ms per step": top["total_ns"] / steps / 1e6,
                    "share of phase %": 100 * top["total_ns"] / inside["total_ns"].sum(),
                }
            )
    return pd.DataFrame(rows)


@computes_table
def top_non_gemm_forward(kernels: pd.DataFrame, count: int = 3) -> pd.DataFrame:
    """(c) The largest non-GEMM kernels of the forward pass (inference runs)."""
    rows = []
    forward = kernels[(kernels["pass"] == "forward") & (kernels["phase"] == "forward")]
    for key, part in forward.groupby(CONFIG, sort=False):
        total = part["total_ns"].sum()
        steps = part["profiled_steps"].iloc[0]
        rest = (
            part[part["category"] != "GEMM"]
            .groupby(["kernel", "category"])
            .agg(
                total_ns=("total_ns", "sum"),
                instances=("instances", "sum"),
            )
            .reset_index()
            .nlargest(count, "total_ns")
        )
        for rank, (_, k) in enumerate(rest.iterrows(), start=1):
            rows.append(
                {
                    **dict(zip(CONFIG, key, strict=False)),
                    "rank": rank,
                    "kernel": k["kernel"],
                    "category": k["category"],
                    "invocations per step": k["instances"] / steps,
                    "ms per step": k["total_ns"] / steps / 1e6,
                    "share of forward %": 100 * k["total_ns"] / total,
                }
            )
    return pd.DataFrame(rows)


@computes_table
def category_shares(kernels: pd.DataFrame) -> pd.DataFrame:
    """Share of GPU time (%) by category, per configuration.

    Columns: GEMM (the headline, always) and every other category that has
    time in some configuration, in CATEGORIES' order.
    """
    if kernels.empty:
        return pd.DataFrame(columns=[*CONFIG, *CATEGORIES])
    sums = kernels.pivot_table(
        index=CONFIG, columns="category", values="total_ns", aggfunc="sum", fill_value=0
    )
    present = [c for c in CATEGORIES if c == "GEMM" or c in sums]
    shares = 100 * sums.reindex(columns=present, fill_value=0).div(sums.sum(axis=1), axis=0)
    return shares.reset_index()


@computes_table
def gemm_share(kernels: pd.DataFrame) -> pd.DataFrame:
    """(d) GEMM share of GPU time, inference (forward) vs training step."""
    shares = category_shares(kernels)
    if shares.empty:
        return shares
    wide = shares.pivot_table(index=["size", "context_length"], columns="pass", values="GEMM", sort=False)
    wide = wide.rename(columns={"forward": "inference GEMM %", "train_step": "training GEMM %"})
    return wide.reset_index()


@computes_table
def attention_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """(e) Inside attention: softmax time vs matmul time, next to their FLOP ratio.

    Per step, summed over layers. Matmul time is the GEMM kernels in the
    "computing attention scores" and "final matmul" ranges; softmax time is
    every kernel in "computing softmax"; scale and mask time the non-GEMM kernels of the two
    matmul ranges (the division by sqrt(d) and masked_fill). FLOPs per layer: 2·B·T²·d_model for
    each of the two matmuls, SOFTMAX_FLOPS_PER_ELEMENT·B·H·T² for the softmax.
    """
    rows = []
    for key, part in kernels.groupby(CONFIG, sort=False):
        if key[2] != "forward" and (kernels["pass"] == "forward").any():
            continue
        steps = part["profiled_steps"].iloc[0]
        softmax = part[part["range"] == SOFTMAX_RANGE]["total_ns"].sum()
        in_matmul_ranges = part["range"].isin(ATTENTION_MATMUL_RANGES)
        matmul = part[in_matmul_ranges & (part["category"] == "GEMM")]["total_ns"].sum()
        # The scaling by 1/sqrt(d) and the causal mask run beside the score matmul, in its range:
        # with softmax, attention's non-matmul work.
        beside = part[in_matmul_ranges & (part["category"] != "GEMM")]
        # Memory copies in those ranges (a device-to-device copy, a copy kernel making an operand
        # contiguous) are not the scaling or the mask: named apart, so no label holds them unsaid.
        copies = beside[beside["category"] == "memory copy/set"]
        scale_mask = beside["total_ns"].sum() - copies["total_ns"].sum()
        if softmax == 0 and matmul == 0:
            continue
        first = part.iloc[0]
        # A run that recorded no shape (a model of your own may name no heads) has no FLOP ratio.
        batch, ctx, heads, d_model = (
            int(first[c]) if pd.notna(first.get(c)) else float("nan")
            for c in ("batch_size", "context_length", "num_heads", "d_model")
        )
        matmul_flops = 2 * (2 * batch * ctx * ctx * d_model)
        softmax_flops = SOFTMAX_FLOPS_PER_ELEMENT * batch * heads * ctx * ctx
        rows.append(
            {
                "size": key[0],
                "context_length": key[1],
                "pass": key[2],
                "softmax ms": softmax / steps / 1e6,
                "matmul ms": matmul / steps / 1e6,
                "time softmax/matmul": softmax / matmul if matmul else None,
                "scale and mask ms": scale_mask / steps / 1e6,
                "copies in the matmul ranges ms": copies["total_ns"].sum() / steps / 1e6,
                "copies": ", ".join(dict.fromkeys(kernel_alias(str(k)) for k in copies["kernel"])),
                "non-matmul/matmul time": (softmax + scale_mask + copies["total_ns"].sum()) / matmul
                if matmul else None,
                "FLOPs softmax/matmul": softmax_flops / matmul_flops,
            }
        )
    table = pd.DataFrame(rows)
    if not table.empty:
        table["time ratio / FLOP ratio"] = table["time softmax/matmul"] / table["FLOPs softmax/matmul"]
    return table


@computes_table
def adopted_share(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per training configuration: GPU time launched by autograd's thread (adopted by backward)."""
    train = kernels[kernels["pass"] == "train_step"]
    if train.empty or "adopted_ns" not in train:  # a run without it: nothing to say
        return pd.DataFrame()
    sums = train.groupby(CONFIG)[["adopted_ns", "total_ns"]].sum()
    backward = train[train["phase"] == "backward"].groupby(CONFIG)["total_ns"].sum()
    sums["adopted % of step"] = 100 * sums["adopted_ns"] / sums["total_ns"]
    sums["adopted % of backward"] = 100 * sums["adopted_ns"] / backward
    return sums.reset_index()


@computes_table
def module_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """Time per step (ms) by module, per configuration and phase: kernels whose innermost range is a
    module's (lmstudy.measure.module_ranges), the modules' layer numbers replaced by * so that every
    layer's same module adds up; with each module's share of its phase's time and its top kernel."""
    owned = kernels[kernels["range"].astype(str).str.startswith(MODULE_RANGE)].copy()
    if owned.empty:
        return pd.DataFrame()
    owned["module"] = (owned["range"].astype(str).str.removeprefix(MODULE_RANGE)
                       .str.replace(r"\.\d+(?=\.|$)", ".*", regex=True))
    owned["ms"] = per_step(owned, "total_ns") / 1e6
    keys = [*CONFIG, "phase"]
    phase_ms = (kernels.assign(ms=per_step(kernels, "total_ns") / 1e6)
                .groupby(keys, observed=True)["ms"].sum().rename("phase_ms"))
    table = owned.groupby([*keys, "module"], observed=True).agg(ms=("ms", "sum")).reset_index()
    top = (owned.sort_values("ms", ascending=False).drop_duplicates([*keys, "module"])
           [[*keys, "module", "kernel"]].rename(columns={"kernel": "top kernel"}))
    table = table.merge(phase_ms.reset_index(), on=keys).merge(top, on=[*keys, "module"])
    table["share of phase %"] = 100 * table["ms"] / table["phase_ms"]
    table = table.sort_values([*keys, "ms"], ascending=[True] * len(keys) + [False])
    return table.drop(columns="phase_ms").rename(columns={"ms": "ms per step"}).reset_index(drop=True)
