"""Section 5, attention alone: tables, figures, memory accounting and findings.

The functions that compute its findings (sentences) from its tables.
"""

from __future__ import annotations

import pandas as pd

from lmstudy.report.answers import between, count, percent
from lmstudy.report.contract import wording
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.report.labels import faster
from lmstudy.sections.attention.tables import (
    GIB,
    LABELS,
    MIB,
    _config,
    compile_table,
    cublas_workspace_bytes,
    memory_fit_table,
    oom_threshold,
    ratio_frame,
    ratio_words,
    workspace_pairs,
)

# A configuration of one implementation: the key of the rows behind a finding.
KEY = ("implementation", "precision", "batch_size", "head_dim", "seq_len")

# The implementation a memory fit's label names.
IMPLEMENTATION_OF = {label: impl for impl, label in LABELS.items()}


_say = wording(__name__)


@finds
def _oom(frame: pd.DataFrame) -> list[Finding]:
    """Per implementation, how many configurations ran out of memory and the smallest; its rows beside."""
    oom = frame[frame["status"] == "OOM"]
    if not len(oom):
        return [Finding(_say("no_oom", measured=len(frame)), rows_behind(frame, "status", key=KEY))]
    items = []
    for impl, part in oom.groupby("implementation", observed=True):
        first = part.sort_values(["seq_len", "head_dim"]).iloc[0]
        items.append(
            Finding(
                _say(
                    "oom",
                    implementation=LABELS[impl],
                    ran_out=len(part),
                    measured=int((frame["implementation"] == impl).sum()),
                    config=_config(first),
                    precision=first["precision"],
                ),
                rows_behind(frame[frame["implementation"] == impl], "status", key=KEY),
            )
        )
    return items


@finds
def _backends(frame: pd.DataFrame) -> list[Finding]:
    ok = frame[frame["status"] == "ok"]
    sdpa = ok[ok["implementation"] == "sdpa"]
    items = []
    for precision, part in sdpa.groupby("precision"):
        # The backends placed after the words are joined: none recorded (a run from before the column)
        # leaves the old sentence's two spaces, as it always said.
        backends = ", ".join(sorted(set(part["sdpa_backend"].dropna().astype(str))))
        items.append(
            Finding(
                _say("backends", precision=precision, backends="\x00").replace("\x00", backends),
                rows_behind(part, "sdpa_backend", key=KEY),
            )
        )
    return items


def _total_times(frame: pd.DataFrame, slow: str, fast: str) -> pd.DataFrame:
    """Forward+backward ms of `slow` and `fast` per precision x d x seq: the two sides of ratio_frame."""
    ok = frame[frame["status"] == "ok"]
    wide = ok.pivot_table(
        index=["precision", "head_dim", "seq_len"],
        columns="implementation",
        values="total_ms",
        aggfunc="first",
        observed=True,
    )
    return pd.DataFrame({f"{slow}_total_ms": wide[slow], f"{fast}_total_ms": wide[fast]}).reset_index()


@finds
def _speedups(frame: pd.DataFrame) -> list[Finding]:
    """SDPA and compiled over naive eager: the pairs that both ran, with their speed-ups (slow over fast)."""
    items = []
    for slow, fast, what in (("naive", "sdpa", "SDPA"), ("naive", "naive-compile", "torch.compile")):
        ratios = ratio_frame(frame, slow, fast)
        if ratios.empty:
            continue
        times = _total_times(frame, slow, fast)
        for precision, part in ratios.groupby("precision"):
            behind = part.merge(times, on=["precision", "head_dim", "seq_len"], how="left").rename(
                columns={
                    "forward": "forward_speedup",
                    "backward": "backward_speedup",
                    "total": "total_speedup",
                }
            )
            behind = behind[
                [
                    c
                    for c in behind.columns
                    if c
                    in (
                        "precision",
                        "head_dim",
                        "seq_len",
                        f"{slow}_total_ms",
                        f"{fast}_total_ms",
                        "forward_speedup",
                        "backward_speedup",
                        "total_speedup",
                    )
                    or c.endswith(("_low", "_high", "_apart"))
                ]
            ]
            items.append(_speedup(what, precision, part, behind))
    return items


def _speedup(what: str, precision: str, part: pd.DataFrame, behind: pd.DataFrame) -> Finding:
    """One implementation's speed-up over naive eager in one precision: ranked only where the two sides'
    intervals do not overlap; the rest is said to be noise."""
    told = part[part["total_apart"]] if "total_apart" in part else part
    if told.empty:
        return Finding(
            _say(
                "not_told_apart",
                what=what,
                precision=precision,
                configurations=count(len(part), "configuration"),
            ),
            behind,
        )
    top = told.loc[told["total"].idxmax()]
    longest = told[told["seq_len"] == told["seq_len"].max()].iloc[0]
    return Finding(
        _say(
            "speedups",
            what=what,
            precision=precision,
            median=faster(told["total"].median()) if len(told) > 1 else None,
            told=count(len(told), "configuration"),
            top=ratio_words(top, "total"),
            top_config=_config(top),
            left_out=len(part) - len(told),
            compared=len(part),
            longest=int(longest["seq_len"]),
            forward=ratio_words(longest, "forward"),
            backward=ratio_words(longest, "backward"),
        ),
        behind,
    )


@finds
def _compile_time(frame: pd.DataFrame) -> list[Finding]:
    compiled = compile_table(frame)
    if compiled.empty or not compiled["compile s"].notna().any():
        return []
    return [
        Finding(
            _say(
                "compile_time",
                median=compiled["compile s"].median(),
                spread=between(compiled["compile s"].min(), compiled["compile s"].max(), ".1f", " s"),
            ),
            compiled.dropna(subset=["compile s"])[["precision", "d", "seq", "compile s"]],
        )
    ]


def findings(frame: pd.DataFrame) -> list[Finding]:
    """Every finding of the section, in the report's order."""
    return gather(
        _oom(frame), _backends(frame), _speedups(frame), memory_findings(frame), _compile_time(frame)
    )


def _named_constant(frame: pd.DataFrame, fits: pd.DataFrame) -> tuple[float, str]:
    """The constant under naive attention's memory, in bytes, and what it is and how it was found."""
    workspace = cublas_workspace_bytes(frame)
    if workspace == workspace:
        return workspace, "the cuBLAS workspace, measured as what naive's inputs hold beyond SDPA's"
    naive = fits[fits["implementation"] == LABELS["naive"]]
    if len(naive):
        constant = float(naive.loc[naive["d"].idxmax(), "constant MiB"]) * MIB
        return constant, "the constant of the fit below (cuBLAS's workspace and the allocator's rounding)"
    return 0.0, ""


def _measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The configurations that ran with their memory measured (none on a CPU)."""
    return frame[frame["status"] == "ok"].dropna(subset=["memory_before_backward_bytes"])


def memory_findings(frame: pd.DataFrame) -> list[Finding]:
    """How attention's memory grows (a constant plus a power of seq), the accounting, and what removes N^2."""
    measured = _measured(frame)
    if measured.empty:
        return []
    fits = memory_fit_table(frame)
    constant, source = _named_constant(frame, fits)
    return gather(
        _workspace(frame, constant, source),
        _memory_fits(measured, fits),
        _accounting(measured, constant, source),
        _what_removes_n_squared(measured),
        _oom_threshold(measured, constant),
    )


@finds
def _workspace(frame: pd.DataFrame, constant: float, source: str) -> list[Finding]:
    """The cuBLAS workspace under naive's memory, from the pairs of naive's and SDPA's inputs."""
    if not source.startswith("the cuBLAS"):
        return []
    pairs = workspace_pairs(frame)
    return [
        Finding(
            _say("workspace", constant_mib=constant / MIB, source=source),
            pairs.assign(difference_MiB=pairs["difference_bytes"] / MIB),
        )
    ]


@finds
def _memory_fits(measured: pd.DataFrame, fits: pd.DataFrame) -> list[Finding]:
    """Each fit of the largest d (naive compiled aside): the points fitted, with the fit beside them."""
    items = []
    for _, fit in fits.iterrows():
        if fit["implementation"] == LABELS["naive-compile"] or fit["d"] != fits["d"].max():
            continue
        points = measured[
            (measured["implementation"] == IMPLEMENTATION_OF[fit["implementation"]])
            & (measured["precision"] == fit["precision"])
            & (measured["head_dim"] == fit["d"])
        ]
        items.append(
            Finding(
                _say("memory_fit", fit=fit),
                rows_behind(points.sort_values("seq_len"), "memory_before_backward_bytes", key=KEY).assign(
                    constant_MiB=fit["constant MiB"],
                    exponent=fit["exponent of the growing part"],
                    largest_misfit_pct=fit["largest misfit %"],
                ),
            )
        )
    return items


@finds
def _accounting(measured: pd.DataFrame, constant: float, source: str) -> list[Finding]:
    """Naive's measured memory (less the constant) against the accounting's, with each relative error."""
    naive = measured[measured["implementation"] == "naive"]
    if not len(naive):
        return []
    growing = naive["memory_before_backward_bytes"] - constant
    before = growing / naive["predicted_before_backward_bytes"] - 1
    behind = rows_behind(
        naive, "memory_before_backward_bytes", "predicted_before_backward_bytes", key=KEY
    ).assign(constant_bytes=constant, before_backward_error=before)
    what = "cuBLAS workspace" if source.startswith("the cuBLAS") else "fitted constant"
    peak_error = None
    if {"peak_bytes", "predicted_peak_bytes"} <= set(naive.columns):
        peak = (naive["peak_bytes"] - constant) / naive["predicted_peak_bytes"] - 1
        behind = behind.assign(
            peak_bytes=naive["peak_bytes"],
            predicted_peak_bytes=naive["predicted_peak_bytes"],
            peak_error=peak,
        )
        peak_error = percent(peak.abs().max())
    return [
        Finding(
            _say(
                "accounting",
                less={"mib": constant / MIB, "what": what} if source else None,
                before=percent(before.abs().max()),
                peak=peak_error,
                configurations=len(naive),
            ),
            behind,
        )
    ]


@finds
def _what_removes_n_squared(measured: pd.DataFrame) -> list[Finding]:
    """SDPA's memory against naive's at the longest sequence both ran (largest d): the remedy, measured."""
    items = []
    both = measured[measured["implementation"].isin(["naive", "sdpa"])]
    values = [c for c in ("memory_before_backward_bytes", "peak_bytes") if c in both]
    wide = both.pivot_table(
        index=["precision", "head_dim", "seq_len"],
        columns="implementation",
        observed=True,
        aggfunc="first",
        values=values,
    ).dropna()
    if wide.empty or ("memory_before_backward_bytes", "sdpa") not in wide:
        return items
    for precision, part in wide.groupby(level="precision"):
        d = part.index.get_level_values("head_dim").max()
        part = part.xs(d, level="head_dim", drop_level=False)
        seq = part.index.get_level_values("seq_len").max()
        row = part.xs(seq, level="seq_len").iloc[0]
        naive = row[("memory_before_backward_bytes", "naive")]
        sdpa = row[("memory_before_backward_bytes", "sdpa")]
        behind = {
            "precision": precision,
            "head_dim": int(d),
            "seq_len": int(seq),
            "naive_before_backward_bytes": naive,
            "sdpa_before_backward_bytes": sdpa,
            "before_backward_naive_over_sdpa": naive / sdpa,
        }
        peak = None
        if ("peak_bytes", "sdpa") in row and row[("peak_bytes", "sdpa")] > 0:
            naive_peak, sdpa_peak = row[("peak_bytes", "naive")], row[("peak_bytes", "sdpa")]
            behind.update(
                naive_peak_bytes=naive_peak,
                sdpa_peak_bytes=sdpa_peak,
                peak_naive_over_sdpa=naive_peak / sdpa_peak,
            )
            peak = {"sdpa": sdpa_peak / MIB, "naive": naive_peak / MIB, "times": naive_peak / sdpa_peak}
        items.append(
            Finding(
                _say(
                    "what_removes_n_squared",
                    seq=int(seq),
                    d=int(d),
                    precision=precision,
                    sdpa=sdpa / MIB,
                    naive=naive / MIB,
                    times=naive / sdpa,
                    peak=peak,
                ),
                behind,
            )
        )
    return items


@finds
def _oom_threshold(measured: pd.DataFrame, constant: float) -> list[Finding]:
    """From which sequence length naive attention outgrows the device, by the accounting: its inputs."""
    naive = measured[measured["implementation"] == "naive"]
    memory = (
        measured["device_memory_bytes"].dropna()
        if "device_memory_bytes" in measured
        else pd.Series(dtype=float)
    )
    if not (len(naive) and len(memory)):
        return []
    d = int(naive["head_dim"].max())
    batch = int(naive["batch_size"].iloc[0])
    items = []
    from lmstudy.sections.timing.answers import SMALLER_GPUS

    for precision in sorted(naive["precision"].unique()):
        seq = oom_threshold(batch, d, precision, memory.iloc[0], constant)
        behind = {
            "precision": precision,
            "batch_size": batch,
            "head_dim": d,
            "device_memory_bytes": memory.iloc[0],
            "constant_bytes": constant,
            "outgrown_from_seq_len": seq,
        }
        # The course's GPU is an 80 GB one: where a smaller GPU than this one runs out, say that too.
        smaller = {
            name: oom_threshold(batch, d, precision, capacity, constant)
            for name, capacity in SMALLER_GPUS.items()
            if capacity < memory.iloc[0] * 0.95
        }
        behind.update({f"outgrown_on_{name.replace(' ', '')}_from_seq_len": s for name, s in smaller.items()})
        items.append(
            Finding(
                _say(
                    "oom_threshold",
                    precision=precision,
                    batch=batch,
                    d=d,
                    memory_gib=memory.iloc[0] / GIB,
                    seq=seq,
                    smaller=[(name, SMALLER_GPUS[name] / GIB, s) for name, s in smaller.items()],
                ),
                behind,
            )
        )
    return items


# Declared in the section's contract: each writes one kind of finding with the rows behind it.
FINDINGS = (
    _oom,
    _backends,
    _speedups,
    _workspace,
    _memory_fits,
    _accounting,
    _what_removes_n_squared,
    _oom_threshold,
    _compile_time,
)
