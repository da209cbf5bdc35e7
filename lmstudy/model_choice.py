"""Which model the study measures (config `model:`), and where its factory's code lives.

Torch-free: the workflow reads it at parse time (the factory's file is part
of every measuring job's code version) and the scripts parse it before
importing torch. Building the model is lmstudy.measure.factory's job.

A factory is named `path/to/file.py:function` (a path relative to the
project root, or absolute) or `package.module:function` (importable where
the jobs run). It is called once per size with that size's keys as keyword
arguments and returns the model.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from lmstudy.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
BUILTIN_FACTORY = "lmstudy.measure.model:build"
BUILTIN_NAME = "lmstudy built-in Transformer LM"


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """The model of a run: its factory, its label, and the depth of its per-module ranges."""

    factory: str = BUILTIN_FACTORY
    name: str = ""
    # Module paths down to this many dots get a profiler range each (0: none).
    range_depth: int = 0
    # A size's keys beyond the standard dimensions, passed to the factory as they are.
    extra: tuple[tuple[str, object], ...] = ()

    @property
    def builtin(self) -> bool:
        return self.factory == BUILTIN_FACTORY

    @property
    def label(self) -> str:
        """The name the report shows: config's `model.name`, else the factory's function and file."""
        if self.name:
            return self.name
        if self.builtin:
            return BUILTIN_NAME
        return self.factory

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelChoice:
        fields = json.loads(text)
        fields["extra"] = tuple(tuple(pair) for pair in fields.get("extra", ()))
        return cls(**fields)

    @classmethod
    def coerce(cls, value) -> ModelChoice:
        """A ModelChoice from itself, its JSON text or its dict (a spec read back from JSON)."""
        if isinstance(value, cls):
            return value
        return cls.from_json(value if isinstance(value, str) else json.dumps(value))


STANDARD_KEYS = ("d_model", "d_ff", "num_layers", "num_heads")


def choice_from_config(model: dict | None, size_keys: dict) -> ModelChoice:
    """The ModelChoice of config `model:` for one size (its keys from `sizes:`)."""
    model = model or {}
    extra = tuple(sorted((k, v) for k, v in size_keys.items() if k not in STANDARD_KEYS))
    return ModelChoice(
        factory=model.get("factory") or BUILTIN_FACTORY,
        name=model.get("name") or "",
        range_depth=_range_depth(model.get("range_depth"), model.get("factory") or BUILTIN_FACTORY),
        extra=extra,
    )


def _range_depth(depth: int | None, factory: str) -> int:
    """No module ranges on the built-in model by default: its results stay those it always had
    (its own ranges, attention's sub-steps among them, are what section 2 reads)."""
    if depth is not None:
        return int(depth)
    return 0 if factory == BUILTIN_FACTORY else 4


# Where a factory is set: config.yaml, a --configfile or --config model={factory: ...} alike.
FIX_FACTORY = "fix model.factory where you set it (config.yaml, a --configfile or --config)"


def split_reference(reference: str) -> tuple[str, str]:
    """(module or file, function) of a factory reference, or a UserError naming the form."""
    where, sep, function = reference.rpartition(":")
    if not sep or not where or not function.isidentifier():
        raise UserError(
            f"model.factory {reference!r} must be 'path/to/file.py:function' or "
            f"'package.module:function': {FIX_FACTORY}."
        )
    return where, function


def is_file_reference(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def factory_file(reference: str, root: Path = ROOT) -> Path | None:
    """The source file of a factory, found without importing it; None where it cannot be found.

    A file reference is relative to the project root. A module reference is
    looked up on sys.path (a package's module or a package's __init__.py).
    """
    where, _ = split_reference(reference)
    if is_file_reference(where):
        path = Path(where)
        return path if path.is_absolute() else root / path
    parts = where.split(".")
    for base in [str(root), *sys.path]:
        folder = Path(base or ".").joinpath(*parts)
        for candidate in (folder.with_suffix(".py"), folder / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None
