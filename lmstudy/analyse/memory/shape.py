"""What a memory snapshot must hold for the analyzer: its keys and their types.

torch.cuda.memory._dump_snapshot writes more than this; only what
lmstudy.analyse.memory reads is required, so a snapshot of a newer PyTorch with
extra keys still reads. Checked once, up front, so that a file of the right
keys but wrong types is named instead of failing deep in the analysis.
"""

from __future__ import annotations

import math

import jsonschema

_INT = {"type": "integer"}
# What an allocator can report: an address of a 64-bit space, a size no GPU
# comes near (1 PiB), a device index. A value outside is a damaged or made-up
# file, whose peak would be made up too.
_ADDRESS = {"type": "integer", "minimum": 0, "maximum": 2**64 - 1}
_SIZE = {"type": "integer", "minimum": 0, "maximum": 2**50}
_DEVICE = {"type": "integer", "minimum": 0, "maximum": 4096}
# A time in microseconds since the epoch or the process's start: not negative, and finite (below).
_TIME = {"type": "number", "minimum": 0}
_FRAMES = {
    "type": "array",
    "items": {"type": "object", "properties": {"name": {"type": "string"}, "filename": {"type": "string"}}},
}
SCHEMA = {
    "type": "object",
    "required": ["segments", "device_traces"],
    "properties": {
        "segments": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["address", "total_size", "blocks"],
                "properties": {
                    "device": _DEVICE,
                    "address": _ADDRESS,
                    "total_size": _SIZE,
                    "blocks": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["address", "size", "state"],
                            "properties": {
                                "address": _ADDRESS,
                                "size": _SIZE,
                                "requested_size": _SIZE,
                                "state": {"type": "string"},
                                "frames": _FRAMES,
                            },
                        },
                    },
                },
            },
        },
        "device_traces": {
            "type": "array",
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["action", "size", "time_us"],
                    "properties": {
                        "action": {"type": "string"},
                        "addr": _ADDRESS,
                        "size": _SIZE,
                        "time_us": _TIME,
                        "frames": _FRAMES,
                    },
                },
            },
        },
        "allocator_settings": {"type": "object"},
        "external_annotations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["stage", "name", "time_us"],
                "properties": {
                    "stage": {"type": "string"},
                    "name": {"type": "string"},
                    "time_us": _TIME,
                    "device": _DEVICE,
                },
            },
        },
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def problem(data) -> str | None:
    """The first thing wrong with `data` as a snapshot ('segments.0.blocks.2.size: ...'), or None."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if error is None:
        return _not_finite(data)
    where = ".".join(str(p) for p in error.absolute_path) or "the top level"
    message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    return f"{where}: {message}"


def _not_finite(data: dict) -> str | None:
    """The first time that is NaN or infinite (JSON schema's bounds let NaN through), or None."""
    places = [
        *((f"device_traces.{d}.{i}.time_us", e["time_us"])
          for d, trace in enumerate(data["device_traces"]) for i, e in enumerate(trace)),
        *((f"external_annotations.{i}.time_us", a["time_us"])
          for i, a in enumerate(data.get("external_annotations", []))),
    ]
    for where, value in places:
        if not math.isfinite(value):
            return f"{where}: {value!r} is not a finite time"
    return None


def has_allocations(data: dict) -> bool:
    """Whether the snapshot saw any memory at all: a block in a segment or an event in a trace."""
    return any(segment["blocks"] for segment in data["segments"]) or any(data["device_traces"])
