"""How every section names the passes and words a speed ratio, and in which order it lists the sizes."""

from __future__ import annotations

import math

import pandas as pd

from lmstudy import hardware

PASS_LABELS = {
    "forward": "forward",
    "forward_backward": "forward+backward",
    "train_step": "training step",
}


# The report header's names of the provenance columns (lmstudy.environment.ENVIRONMENT_COLUMNS).
ENVIRONMENT_LABELS = {
    "model": "model",
    "gpu": "device",
    "gpu_power_limit_w": "GPU power limit (W)",
    "cpu": "CPU",
    "driver": "driver",
    "cuda": "CUDA",
    "torch": "PyTorch",
    "python": "Python",
    "host": "host",
    "commit": "commit",
    "date": "date",
    "tf32_matmul": "TF32 in fp32 matrix products",
    "tf32_cudnn": "TF32 in cuDNN",
    "gpu_index": "GPU index",
    "gpu_uuid": "GPU UUID",
    "gpu_chosen_by": "GPU chosen by",
    "gpu_foreign_processes": "other processes on the GPU",
}


def environment_label(key: str) -> str:
    """How the header names a provenance column: words, not the CSV's key."""
    return ENVIRONMENT_LABELS.get(key, key.replace("_", " "))


def on_cpu(rows: pd.DataFrame) -> bool:
    """Whether `rows` were measured on the CPU (their device, column gpu, reads "cpu (...)"): then a
    method text or explanation speaks of the CPU, not of CUDA, kernels or a GPU."""
    devices = rows["gpu"].dropna().astype(str) if "gpu" in rows else pd.Series(dtype=str)
    return not devices.empty and devices.str.startswith("cpu").all()


# What the first step of a fresh process pays once, on each device.
COLD_START = {
    "cuda": "the CUDA context and kernel loading, cuBLAS's handle and algorithm choice, the caching "
            "allocator's first cudaMallocs",
    "cpu": "the first allocations of the model's activations and gradients, and each operator's first "
           "call, which picks its kernel and fills its caches",
}


def cold_start_costs(rows: pd.DataFrame) -> str:
    return COLD_START["cpu" if on_cpu(rows) else "cuda"]


def sentence_start(text: str) -> str:
    """`text` as a sentence's start: its first letter upper case, the rest as written ("CPU time",
    not str.capitalize's "Cpu time")."""
    return text[:1].upper() + text[1:]


def faster(ratio: float) -> str:
    """A time ratio (old / new) in words: '2.10× faster' or '1.25× slower'."""
    return f"{ratio:.2f}× faster" if ratio >= 1 else f"{1 / ratio:.2f}× slower"


def mfu_units(rows: pd.DataFrame) -> pd.Series:
    """Per row, the unit whose datasheet peak its MFU divides by (hardware.peak_unit).

    The row's own `mfu_peak` where the job wrote it, else from its precision
    and TF32 setting (results from before the column existed).
    """
    tf32 = rows["tf32_matmul"] if "tf32_matmul" in rows else pd.Series(False, index=rows.index)
    pairs = zip(rows["precision"], tf32, strict=True)
    derived = [hardware.peak_unit(str(p), str(t).lower() == "true") for p, t in pairs]
    if "mfu_peak" not in rows:
        return pd.Series(derived, index=rows.index)
    return rows["mfu_peak"].where(rows["mfu_peak"].notna(), pd.Series(derived, index=rows.index))


def peak_words(rows: pd.DataFrame) -> str:
    """What the MFU of `rows` divides by: 'of the fp32 peak (CUDA cores, no TF32), 66.9 TFLOP/s'."""
    peaks = pd.to_numeric(rows.get("peak_tflops", pd.Series(dtype=float)), errors="coerce")
    pairs = sorted(
        {(u, float(t)) for u, t in zip(mfu_units(rows), peaks.reindex(rows.index), strict=True) if t == t}
    )
    if not pairs:
        return "of the datasheet peak"
    return "of the " + "; ".join(f"{hardware.PEAK_NAMES[u]}, {t:.1f} TFLOP/s" for u, t in pairs)


def mfu_note(rows: pd.DataFrame) -> str:
    """A table's note naming the peak its MFU column divides by, so that no column of long text
    repeats it per row: 'MFU: each row over the datasheet peak of its own precision: fp32 peak
    (CUDA cores, no TF32), 66.9 TFLOP/s; bf16 tensor-core peak, 989.4 TFLOP/s.'"""
    with_mfu = rows[pd.to_numeric(rows["mfu"], errors="coerce").notna()] if "mfu" in rows else rows.iloc[0:0]
    if with_mfu.empty:
        return ""
    return f"MFU: each row over the datasheet peak of its own precision: {peak_words(with_mfu)[7:]}."


# The sizes in the order config.yaml lists them (`sizes:`), set once per
# process by the report-side scripts (--sizes) before any section runs.
_CONFIG_SIZES: list[str] = []


def use_size_order(sizes: list[str]) -> None:
    """List sizes in this order everywhere (the config's `sizes:`, as the workflow passes it)."""
    _CONFIG_SIZES[:] = list(dict.fromkeys(sizes))


def size_order(seen) -> list[str]:
    """The sizes in `seen`, in the config's order; any the config does not list come last, as seen."""
    seen = [str(s) for s in dict.fromkeys(seen)]
    return [s for s in _CONFIG_SIZES if s in seen] + [s for s in seen if s not in _CONFIG_SIZES]


def order_sizes(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its size column an ordered categorical in the config's order."""
    frame["size"] = pd.Categorical(frame["size"], categories=size_order(frame["size"]), ordered=True)
    return frame


# Every column header the report shows, from the names in the result tables.
COLUMN_LABELS = {
    "size": "size",
    "context_length": "context",
    "context": "context",
    "pass": "pass",
    "pass_name": "pass",
    "precision": "precision",
    "variant": "variant",
    "rung": "rung",
    "category": "category",
    "kernel": "kernel",
    "phase": "phase",
    "range": "range",
    "status": "status",
    "head_dim": "head size",
    "seq_len": "sequence length",
    "batch_size": "batch",
    "implementation": "implementation",
    "backend": "backend",
    "mode": "mode",
    "section": "section",
    "rule": "rule",
    "job": "job",
    "seconds": "time (s)",
    "jobs": "jobs",
    "d_model": "d_model",
    "d_ff": "d_ff",
    "warmup_steps": "warm-up steps",
    "instances": "invocations",
}
# A unit at the end of a header goes in parentheses: "median ms" -> "median (ms)".
_UNITS = ("ms", "s", "GiB", "MiB", "GB", "%", "×", "ns", "µs")


def column_label(name: str) -> str:
    """The header a reader sees for column `name`: one vocabulary for every section."""
    if name in COLUMN_LABELS:
        return COLUMN_LABELS[name]
    if name in PASS_LABELS:  # a pivot's column per pass
        return PASS_LABELS[name]
    label = name.replace("_", " ") if " " not in name and "_" in name else name
    for unit in _UNITS:
        if label.endswith(f" {unit}") and not label.endswith(f"({unit})"):
            head = label[: -len(unit) - 1]
            # A number before the unit makes a quantity ("fits in 80 GB"), not a header's unit.
            if head.rsplit(" ", 1)[-1].replace(".", "", 1).isdigit():
                return label
            return f"{head} ({unit})"
    return label


def in_size_order(table: pd.DataFrame, column: str = "size") -> pd.DataFrame:
    """`table`'s rows with sizes in the config's order, every other order kept (a stable sort):
    tables computed by grouping on a size's name come out alphabetical (2.7B before small)."""
    if table.empty or column not in table:
        return table
    rank = {s: i for i, s in enumerate(size_order(table[column].astype(str)))}
    order = table[column].astype(str).map(rank).to_numpy().argsort(kind="stable")
    return table.iloc[order].reset_index(drop=True)


def interval_text(low: pd.Series, high: pd.Series) -> pd.Series:
    """Intervals as text, every bound of the column written with one number of decimals (the column's
    typical magnitude to three significant digits): 163.0–171.0 beside 11.0–21.0, never 163–171 beside
    11–21.0."""
    bounds = pd.to_numeric(pd.concat([low, high]), errors="coerce").abs()
    bounds = bounds[bounds > 0]
    decimals = 0 if bounds.empty else min(4, max(0, 2 - math.floor(math.log10(bounds.median()))))
    return pd.Series([
        f"{lo:,.{decimals}f}–{hi:,.{decimals}f}" if pd.notna(lo) and pd.notna(hi) else ""
        for lo, hi in zip(low, high, strict=True)
    ], index=low.index, dtype=object)
