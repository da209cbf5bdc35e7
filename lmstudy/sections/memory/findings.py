"""Section 4, memory: peaks, memory by kind, timelines and largest allocations.

The functions that compute its findings (sentences) from its tables: each small one is marked
@finds and returns its findings with the rows behind them (lmstudy.report.finding).
"""

from __future__ import annotations

import pandas as pd

from lmstudy.analyse.memory.kinds import KINDS
from lmstudy.report.answers import of_all, percent, span
from lmstudy.report.contract import wording
from lmstudy.report.finding import Finding, finds, gather, rows_behind
from lmstudy.report.labels import PASS_LABELS
from lmstudy.sections.memory.tables import GIB, KIND_LABELS, _label, measured

_say = wording(__name__)


@finds
def _allocator_agreement(rows: pd.DataFrame) -> list[Finding]:
    """The snapshot's peak against torch.cuda.max_memory_allocated(), over every snapshot that has both."""
    agree = rows[rows["peak_vs_allocator"].notna()] if "peak_vs_allocator" in rows else rows.iloc[0:0]
    if agree.empty:
        return []
    worst = agree.loc[agree["peak_vs_allocator"].abs().idxmax()]
    equal = worst["peak_vs_allocator"] == 0
    text = _say(
        "allocator_agreement",
        snapshots=len(agree),
        difference=None if equal else percent(worst["peak_vs_allocator"]),
        worst=_label(worst),
    )
    behind = rows_behind(agree, "status", "peak_bytes", "max_memory_allocated", "peak_vs_allocator")
    return [Finding(text, behind)]


@finds
def _out_of_memory(frame: pd.DataFrame) -> list[Finding]:
    """Each configuration out of memory, with what was allocated when it failed (where the snapshot says)."""
    items = []
    oom = frame[frame["status"] == "OOM"]
    for i in range(len(oom)):
        row = oom.iloc[i]
        allocated = row["peak_bytes"] / GIB if pd.notna(row.get("peak_bytes")) else None
        behind = rows_behind(oom.iloc[[i]], "status", "stage", "peak_bytes")
        if "peak_bytes" in behind:
            behind = behind.assign(peak_gib=behind["peak_bytes"] / GIB)
        items.append(
            Finding(
                _say("out_of_memory", label=_label(row), stage=row["stage"], allocated_gib=allocated), behind
            )
        )
    return items


@finds
def _training_over_forward(ok: pd.DataFrame) -> list[Finding]:
    """A training step's peak over the forward pass's, per size, context and precision measured in both."""
    wide = ok.pivot_table(
        index=["size", "context_length", "precision"], columns="pass", values="peak_bytes", observed=True
    )
    if not {"forward", "train_step"} <= set(wide.columns):
        return []
    ratio = (wide["train_step"] / wide["forward"]).dropna()
    if not len(ratio):
        return []
    behind = pd.DataFrame(
        {
            "forward_peak_bytes": wide["forward"],
            "train_step_peak_bytes": wide["train_step"],
            "train_step_over_forward": wide["train_step"] / wide["forward"],
        }
    ).loc[ratio.index]
    return [
        Finding(
            _say(
                "training_over_forward",
                spread=span(ratio.min(), ratio.max(), ".1f"),
                median=ratio.median() if len(ratio) > 1 else None,
                configurations=len(ratio),
            ),
            rows_behind(behind, "forward_peak_bytes", "train_step_peak_bytes", "train_step_over_forward"),
        )
    ]


@finds
def _bf16_against_fp32(ok: pd.DataFrame) -> list[Finding]:
    """Per pass: bf16 autocast's peak over fp32's, per size and context measured in both."""
    by_precision = ok.pivot_table(
        index=["size", "context_length", "pass"], columns="precision", values="peak_bytes", observed=True
    )
    if not {"fp32", "bf16"} <= set(by_precision.columns):
        return []
    items = []
    for pass_name in PASS_LABELS:
        if pass_name not in by_precision.index.get_level_values("pass"):
            continue
        part = by_precision.xs(pass_name, level="pass")
        ratio = (part["bf16"] / part["fp32"]).dropna()
        if not len(ratio):
            continue
        median = ratio.median()
        change = "unchanged" if abs(median - 1) < 0.005 else "raises" if median > 1 else "lowers"
        behind = pd.DataFrame(
            {
                "fp32_peak_bytes": part["fp32"],
                "bf16_peak_bytes": part["bf16"],
                "bf16_over_fp32": part["bf16"] / part["fp32"],
            }
        ).loc[ratio.index]
        items.append(
            Finding(
                _say(
                    "bf16_against_fp32",
                    step=PASS_LABELS[pass_name].capitalize(),
                    change=change,
                    median=median,
                    spread=span(ratio.min(), ratio.max()),
                    configurations=len(ratio),
                ),
                rows_behind(
                    behind.assign(**{"pass": pass_name}),
                    "fp32_peak_bytes",
                    "bf16_peak_bytes",
                    "bf16_over_fp32",
                ),
            )
        )
    return items


@finds
def _context_growth(ok: pd.DataFrame) -> list[Finding]:
    """Per size, pass and precision: the peak at the shortest context against the longest."""
    items = []
    for (size, pass_name, precision), part in ok.groupby(["size", "pass", "precision"], observed=True):
        part = part.sort_values("context_length")
        if len(part) < 2:
            continue
        lo, hi = part.iloc[0], part.iloc[-1]
        first, last = f"{lo['peak_bytes'] / GIB:.2f}", f"{hi['peak_bytes'] / GIB:.2f}"
        ends = rows_behind(part.iloc[[0, -1]], "peak_bytes")
        behind = ends.assign(peak_gib=ends["peak_bytes"] / GIB, change_gib=(ends["peak_bytes"] / GIB).diff())
        # A range of one value is said once.
        change = None if first == last else (hi["peak_bytes"] - lo["peak_bytes"]) / GIB
        items.append(
            Finding(
                _say(
                    "context_growth",
                    size=size,
                    step=PASS_LABELS[pass_name],
                    precision=precision,
                    shortest=lo["context_length"],
                    longest=hi["context_length"],
                    first=first,
                    last=last,
                    change=change,
                ),
                behind,
            )
        )
    return items


def _bytes(rows: pd.DataFrame, kind: str) -> pd.Series:
    column = f"{kind}_bytes"
    if column not in rows:
        return pd.Series(float("nan"), rows.index)
    return pd.to_numeric(rows[column], errors="coerce")


@finds
def _autocast_copies(ok: pd.DataFrame) -> list[Finding]:
    """Autocast's bf16 copies of the weights at the peak, against the fp32 parameters' bytes."""
    cache = _bytes(ok, "autocast_cache")
    with_cache = ok[cache > 0]
    if not len(with_cache):
        return []
    kept = cache[cache > 0] / GIB
    over_parameters = (cache / _bytes(ok, "parameters"))[cache > 0]
    behind = rows_behind(with_cache).assign(
        autocast_cache_bytes=cache[cache > 0],
        parameters_bytes=_bytes(ok, "parameters")[cache > 0],
        autocast_cache_gib=kept,
        copies_over_parameters=over_parameters,
    )
    return [
        Finding(
            _say(
                "autocast_copies",
                kept=span(kept.min(), kept.max(), unit=" GiB"),
                snapshots=len(with_cache),
                over_parameters=over_parameters.median(),
            ),
            behind,
        )
    ]


@finds
def _activations_without_copies(ok: pd.DataFrame) -> list[Finding]:
    """bf16's activations at the peak over fp32's (autocast's copies apart), where autocast kept copies."""
    if not (_bytes(ok, "autocast_cache") > 0).any():
        return []
    key = ["size", "context_length", "pass"]
    wide = ok.assign(act=_bytes(ok, "activations")).pivot_table(
        index=key, columns="precision", values="act", observed=True
    )
    if not {"fp32", "bf16"} <= set(wide.columns):
        return []
    ratio = (wide["bf16"] / wide["fp32"]).replace([float("inf")], float("nan")).dropna()
    if not len(ratio):
        return []
    behind = pd.DataFrame(
        {
            "fp32_activations_bytes": wide["fp32"],
            "bf16_activations_bytes": wide["bf16"],
            "bf16_over_fp32": ratio,
        }
    ).loc[ratio.index]
    return [
        Finding(
            _say(
                "activations_without_copies",
                spread=span(ratio.min(), ratio.max(), unit="×"),
                median=ratio.median(),
                configurations=len(ratio),
            ),
            rows_behind(behind, "fp32_activations_bytes", "bf16_activations_bytes", "bf16_over_fp32"),
        )
    ]


@finds
def _optimizer_state(ok: pd.DataFrame) -> list[Finding]:
    """AdamW's state at the peak against the parameters' bytes."""
    state = _bytes(ok, "optimizer_state")
    train = ok[state > 0]
    if not len(train):
        return []
    parameters = _bytes(ok, "parameters")[state > 0]
    ratio = state[state > 0] / parameters
    behind = rows_behind(train).assign(
        optimizer_state_bytes=state[state > 0],
        parameters_bytes=parameters,
        optimizer_state_gib=state[state > 0] / GIB,
        state_over_parameters=ratio,
    )
    return [
        Finding(
            _say(
                "optimizer_state",
                spread=span(ratio.min(), ratio.max(), unit="×"),
                gib=span(state[state > 0].min() / GIB, state[state > 0].max() / GIB, unit=" GiB"),
            ),
            behind,
        )
    ]


@finds
def _forward_phase_peak(ok: pd.DataFrame) -> list[Finding]:
    """Per size and precision: the training step's forward-phase peak against its peak, across contexts."""
    steps = ok[(ok["pass"] == "train_step")]
    if "forward_phase_peak_bytes" not in steps:
        return []
    items = []
    for (size, precision), part in steps.groupby(["size", "precision"], observed=True):
        part = part.sort_values("context_length").dropna(subset=["forward_phase_peak_bytes"])
        if len(part) < 2:
            continue
        lo, hi = part.iloc[0], part.iloc[-1]
        first, last = f"{lo['peak_bytes'] / GIB:.2f}", f"{hi['peak_bytes'] / GIB:.2f}"
        behind = rows_behind(part, "forward_phase_peak_bytes", "peak_bytes", "peak_phase")
        behind = behind.assign(
            forward_phase_peak_gib=behind["forward_phase_peak_bytes"] / GIB,
            peak_gib=behind["peak_bytes"] / GIB,
        )
        ends = [
            {"context": row["context_length"], "forward_gib": row["forward_phase_peak_bytes"] / GIB}
            for row in (lo, hi)
        ]
        items.append(
            Finding(
                _say(
                    "forward_phase_peak",
                    size=size,
                    precision=precision,
                    shortest=ends[0],
                    longest=ends[1],
                    phases=", ".join(sorted(set(part["peak_phase"].astype(str)))),
                    first=first,
                    last=last,
                ),
                behind,
            )
        )
    return items


@finds
def _optimizer_temporaries(ok: pd.DataFrame) -> list[Finding]:
    """Where a training step peaks in the optimizer phase: its temporaries against the parameters' bytes."""
    steps = ok[(ok["pass"] == "train_step")]
    in_optimizer = steps[steps["peak_phase"] == "optimizer"] if "peak_phase" in steps else steps.iloc[0:0]
    if not len(in_optimizer):
        return []
    temporaries, parameters = _bytes(in_optimizer, "temporaries"), _bytes(in_optimizer, "parameters")
    share = temporaries / parameters
    behind = rows_behind(in_optimizer, "peak_phase").assign(
        temporaries_bytes=temporaries, parameters_bytes=parameters, temporaries_over_parameters=share
    )
    return [
        Finding(
            _say(
                "optimizer_temporaries",
                snapshots=len(in_optimizer),
                spread=span(share.min(), share.max(), unit="×"),
            ),
            behind,
        )
    ]


def _kind_findings(ok: pd.DataFrame) -> list[Finding]:
    """Autocast's weight copies against the activations, AdamW's state against the parameters, the
    forward-phase peak against context, and the optimizer phase's temporaries."""
    return gather(
        _autocast_copies(ok),
        _activations_without_copies(ok),
        _optimizer_state(ok),
        _forward_phase_peak(ok),
        _optimizer_temporaries(ok),
    )


@finds
def _largest_training_peak(ok: pd.DataFrame) -> list[Finding]:
    """Memory by kind at the largest training-step peak: its three largest kinds, each with its share."""
    train = ok[ok["pass"] == "train_step"]
    if not len(train):
        return []
    row = train.loc[train["peak_bytes"].idxmax()]
    shares = {k: row.get(f"{k}_bytes", 0) or 0 for k in KINDS}
    ranked = sorted(((v, k) for k, v in shares.items() if v), reverse=True)
    top = ranked[:3]
    kinds = [(KIND_LABELS[k], v / GIB, v / row["peak_bytes"] * 100) for v, k in top]
    # One row per kind at that peak, largest first: the sentence names the first three.
    behind = pd.DataFrame(
        [
            {
                **{
                    c: row[c]
                    for c in ("size", "context_length", "pass", "precision", "peak_phase", "peak_bytes")
                },
                "kind": k,
                "label": KIND_LABELS[k],
                "bytes": v,
                "gib": v / GIB,
                "share_of_peak": v / row["peak_bytes"],
            }
            for v, k in ranked
        ]
    )
    return [
        Finding(
            _say("largest_training_peak", label=_label(row), phase=row["peak_phase"], kinds=kinds), behind
        )
    ]


@finds
def _peak_phases(ok: pd.DataFrame) -> list[Finding]:
    """The phase each training step peaks in, counted."""
    train = ok[ok["pass"] == "train_step"]
    if not len(train):
        return []
    phases = train["peak_phase"].value_counts()
    # One phase in every configuration: no "in 1 of 1". The phases counted are placed after the words
    # are joined: none recorded (a run from before the column) leaves two spaces, as it always did.
    counted = _say("phase_counts", phases=list(phases.items()), steps=len(train))
    text = _say(
        "peak_phases",
        phases=list(phases.items()),
        counted="\x00",
        all=of_all(len(train), len(train), "configuration"),
    )
    return [
        Finding(
            text.replace("\x00", counted),
            rows_behind(train, "peak_phase", "peak_bytes"),
        )
    ]


@finds
def _activations_against_residual(ok: pd.DataFrame) -> list[Finding]:
    """The activations live at a training step's peak, in residual-stream activations."""
    train = ok[ok["pass"] == "train_step"]
    if not len(train) or not {"residual_stream_bytes", "activations_bytes"} <= set(train.columns):
        return []
    ratio = train["activations_bytes"] / train["residual_stream_bytes"]
    if not ratio.max() >= 1:
        return []
    behind = rows_behind(train, "activations_bytes", "residual_stream_bytes").assign(
        activations_over_residual=ratio
    )
    return [
        Finding(
            _say("activations_against_residual", spread=span(ratio.min(), ratio.max(), ".0f", "×")), behind
        )
    ]


# Declared in the section's contract: each writes one kind of finding with the rows behind it.
FINDINGS = (
    _allocator_agreement,
    _out_of_memory,
    _training_over_forward,
    _bf16_against_fp32,
    _context_growth,
    _autocast_copies,
    _activations_without_copies,
    _optimizer_state,
    _forward_phase_peak,
    _optimizer_temporaries,
    _largest_training_peak,
    _peak_phases,
    _activations_against_residual,
)


def findings(frame: pd.DataFrame) -> list[Finding]:
    """Every finding of the section, in the report's order."""
    rows = measured(frame)
    ok = rows[rows["status"] == "ok"]
    return gather(
        _allocator_agreement(rows),
        _out_of_memory(frame),
        _training_over_forward(ok),
        _bf16_against_fp32(ok),
        _context_growth(ok),
        _kind_findings(ok),
        _largest_training_peak(ok),
        _peak_phases(ok),
        _activations_against_residual(ok),
    )
