"""What a memory snapshot must hold for the analyzer: its keys and their types.

torch.cuda.memory._dump_snapshot writes more than this; only what
lmstudy.analyse.memory reads is required, so a snapshot of a newer PyTorch with
extra keys still reads. Checked once, up front, so that a file of the right
keys but wrong types is named instead of failing deep in the analysis.
"""

from __future__ import annotations

import jsonschema

_INT = {"type": "integer"}
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
                    "device": _INT,
                    "address": _INT,
                    "total_size": _INT,
                    "blocks": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["address", "size", "state"],
                            "properties": {
                                "address": _INT,
                                "size": _INT,
                                "requested_size": _INT,
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
                        "addr": _INT,
                        "size": _INT,
                        "time_us": {"type": "number"},
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
                    "time_us": {"type": "number"},
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
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "the top level"
    return f"{where}: {error.message}"


def has_allocations(data: dict) -> bool:
    """Whether the snapshot saw any memory at all: a block in a segment or an event in a trace."""
    return any(segment["blocks"] for segment in data["segments"]) or any(data["device_traces"])
