"""One snapshot's summary, and the section's table of all of them.

`summarize` reads a snapshot (and, when the snapshot job wrote one, its
metadata: the allocator's own peak over the same step, the tensors'
addresses) and returns what `write` puts in a summary directory:

- ``summary.json``: ``peak_bytes`` (the peak of allocated memory, counting the
  blocks allocated before recording began), where it happened, memory by kind
  at the peak, the phases, the largest allocations, and the allocator's
  ``max_memory_allocated`` beside it;
- ``timeline.csv``: allocated bytes after every alloc/free, with its phase;
- ``largest_allocations.csv``: the largest allocations with their source lines;
- ``kinds.csv``: bytes by kind at the peak.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lmstudy.analyse.memory import kinds as kinds_mod
from lmstudy.analyse.memory import phases as phases_mod
from lmstudy.analyse.memory import snapshot as snapshot_mod
from lmstudy.analyse.memory import sources
from lmstudy.atomic import write_csv, write_json
from lmstudy.errors import UserError

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def meta_path_for(snapshot_path: Path) -> Path:
    """Where the snapshot job puts its metadata: beside the pickle, `.json`."""
    return snapshot_path.with_suffix(".json")


# What summarize reads of the snapshot job's JSON; the rest is copied as it is.
_COUNT = {"type": "integer", "minimum": 0}
META_SCHEMA = {
    "type": "object",
    "properties": {
        "device_index": {"type": "integer", "minimum": 0, "maximum": 4096},
        "max_memory_allocated": {"type": ["integer", "null"], "minimum": 0, "maximum": 2**50},
        "tensors": {"type": "object", "additionalProperties": {"type": "array", "items": _COUNT}},
        "batch_size": _COUNT,
        "context_length": _COUNT,
        "d_model": _COUNT,
        "residual_dtype": {"type": "string"},
    },
}


def read_meta(path: Path | None, named: bool = False) -> dict:
    """The snapshot job's JSON at `path`; {} where there is none beside the snapshot.

    `named`: the user passed it (--meta), so the advice is to pass the right
    file; the one found beside the snapshot is the job's own, to be rewritten.
    """
    if path is None or (not named and not path.exists()):
        return {}
    fix = (
        "pass the JSON that the memory job (lmstudy measure memory) wrote beside the snapshot as --meta, "
        "or leave --meta out"
        if named else "delete it and rerun the snapshot job"
    )
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) else f"not valid JSON: {error}"
        raise UserError(f"{path} is not a snapshot job's JSON ({reason}): {fix}.") from None
    import jsonschema

    wrong = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(META_SCHEMA).iter_errors(meta))
    if wrong is not None:
        where = ".".join(str(p) for p in wrong.absolute_path) or "the top level"
        raise UserError(f"{path} is not a snapshot job's JSON ({where}: {wrong.message[:200]}): {fix}.")
    return meta


def summarize(snapshot_path: str | Path, meta: dict | None = None, top: int = 10) -> dict:
    """Everything `write` needs: summary dict and its three tables."""
    meta = meta or {}
    snap = snapshot_mod.load(snapshot_path, meta.get("device_index"))
    labels = phases_mod.label_events(snap.trace, snap.annotations)
    kinds = kinds_mod.classify(snap, labels, meta.get("tensors"), str(meta.get("precision", "")))
    rows = _timeline_rows(snap, labels)
    _, peak_index = snap.peak()
    at_peak = kinds_mod.bytes_by_kind(snap.live_at(peak_index), kinds)
    largest = sources.largest(snap.allocations, labels, kinds, top=top)
    summary = {
        "snapshot": str(snapshot_path),
        **_peak_facts(snap, labels),
        "kinds_at_peak": at_peak,
        "phase_peaks": _phase_peaks(rows),
        "kinds_source": "tensor addresses" if meta.get("tensors") else "lifetimes and phases",
        "phases": phases_mod.spans(labels),
        "largest_allocations": largest,
        **_allocator_agreement(snap, meta),
    }
    kinds_table = pd.DataFrame(
        [{"kind": k, "bytes": v} for k, v in at_peak.items()], columns=["kind", "bytes"]
    )
    return {
        "summary": summary,
        "timeline": pd.DataFrame(rows),
        "largest": pd.DataFrame(largest),
        "kinds": kinds_table,
    }


def _timeline_rows(snap: snapshot_mod.Snapshot, labels: list[str]) -> list[dict]:
    """timeline.csv's rows: what was allocated at the start, then after every alloc and free."""
    timeline = snap.timeline()
    t0 = snap.trace[0]["time_us"] if snap.trace else 0
    rows = [
        {
            "index": -1,
            "time_ms": 0.0,
            "action": "start",
            "size_bytes": 0,
            "allocated_bytes": snap.allocated_at_start,
            "phase": labels[0] if labels else "outside",
        }
    ]
    for index, event in enumerate(snap.trace):
        if event["action"] in (snapshot_mod.ALLOC, snapshot_mod.FREE):
            rows.append(
                {
                    "index": index,
                    "time_ms": (event["time_us"] - t0) / 1e3,
                    "action": event["action"],
                    "size_bytes": event["size"],
                    "allocated_bytes": int(timeline[index]),
                    "phase": labels[index],
                }
            )
    return rows


def _phase_peaks(rows: list[dict]) -> dict[str, int]:
    """The highest allocated memory within each phase: a training step's peak is often its optimizer
    phase's (parameter-sized foreach temporaries on top of the state), flat in context, while the
    forward's grows with it."""
    events = pd.DataFrame(rows[1:])
    phase_peaks = events.groupby("phase")["allocated_bytes"].max() if len(events) else {}
    return {phase: int(v) for phase, v in dict(phase_peaks).items()}


def _peak_facts(snap: snapshot_mod.Snapshot, labels: list[str]) -> dict:
    """The snapshot's device and size, its peak (when and in which phase) and what was allocated at
    its start and end, in summary.json's order."""
    peak, peak_index = snap.peak()
    t0 = snap.trace[0]["time_us"] if snap.trace else 0
    return {
        "device_index": snap.device,
        "events": len(snap.trace),
        "peak_bytes": peak,
        "peak_index": peak_index,
        "peak_time_ms": ((snap.event_time_us(peak_index) or t0) - t0) / 1e3,
        "peak_phase": labels[peak_index] if labels and peak_index >= 0 else "before recording",
        "allocated_at_start_bytes": snap.allocated_at_start,
        "allocated_at_end_bytes": snap.allocated_at_end,
    }


def _allocator_agreement(snap: snapshot_mod.Snapshot, meta: dict) -> dict:
    """The allocator's own peak over the same step beside the snapshot's, whether the trace holds an
    out-of-memory, and the snapshot job's metadata (less the tensors' addresses)."""
    peak, _ = snap.peak()
    allocator_peak = meta.get("max_memory_allocated")
    return {
        "max_memory_allocated": allocator_peak,
        "peak_vs_allocator": (peak / allocator_peak - 1) if allocator_peak else None,
        "oom_in_trace": any(e["action"] == "oom" for e in snap.trace),
        "meta": {k: v for k, v in meta.items() if k != "tensors"},
    }


def write(result: dict, out_dir: str | Path) -> None:
    out_dir = Path(out_dir)
    write_csv(out_dir / "timeline.csv", result["timeline"])
    write_csv(out_dir / "largest_allocations.csv", result["largest"])
    write_csv(out_dir / "kinds.csv", result["kinds"])
    write_json(out_dir / "summary.json", result["summary"])  # last: it marks the whole as done


def residual_stream_bytes(batch_size: int, context_length: int, d_model: int, dtype: str) -> int:
    """The size of one residual-stream activation: batch x context x d_model x bytes."""
    return batch_size * context_length * d_model * DTYPE_BYTES[dtype]


def table_row(summary: dict, summary_dir: str) -> dict:
    """One row of the section's table from a summary (the job's meta inside it)."""
    meta = summary.get("meta", {})
    row = {k: v for k, v in meta.items() if not isinstance(v, (dict, list))}
    row.update(
        {
            "peak_bytes": summary["peak_bytes"],
            "max_memory_allocated": summary["max_memory_allocated"],
            "peak_vs_allocator": summary["peak_vs_allocator"],
            "peak_phase": summary["peak_phase"],
            "allocated_at_start_bytes": summary["allocated_at_start_bytes"],
            "events": summary["events"],
            "kinds_source": summary["kinds_source"],
            "summary_dir": summary_dir,
        }
    )
    for kind, value in summary["kinds_at_peak"].items():
        row[f"{kind}_bytes"] = value
    for phase, value in summary.get("phase_peaks", {}).items():
        row[f"{phase}_phase_peak_bytes"] = value
    if meta.get("residual_dtype") and meta.get("d_model"):
        row["residual_stream_bytes"] = residual_stream_bytes(
            meta["batch_size"], meta["context_length"], meta["d_model"], meta["residual_dtype"]
        )
    return row
