"""How every section names the passes and words a speed ratio, and in which order it lists the sizes."""

from __future__ import annotations

import pandas as pd

PASS_LABELS = {
    "forward": "forward",
    "forward_backward": "forward+backward",
    "train_step": "training step",
}


def faster(ratio: float) -> str:
    """A time ratio (old / new) in words: '2.10× faster' or '1.25× slower'."""
    return f"{ratio:.2f}× faster" if ratio >= 1 else f"{1 / ratio:.2f}× slower"


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
            return f"{label[: -len(unit) - 1]} ({unit})"
    return label


def in_size_order(table: pd.DataFrame, column: str = "size") -> pd.DataFrame:
    """`table`'s rows with sizes in the config's order, every other order kept (a stable sort):
    tables computed by grouping on a size's name come out alphabetical (2.7B before small)."""
    if table.empty or column not in table:
        return table
    rank = {s: i for i, s in enumerate(size_order(table[column].astype(str)))}
    order = table[column].astype(str).map(rank).to_numpy().argsort(kind="stable")
    return table.iloc[order].reset_index(drop=True)
