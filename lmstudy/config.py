"""The study's configuration: presets merged in, then validated.

Used by the Snakefile at parse time, so it imports neither torch nor
anything that touches a GPU.
"""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import yaml


class ConfigError(Exception):
    """The config is wrong; the message is one sentence naming what to fix."""


def deep_merge(base: dict, override: dict) -> dict:
    """Return base updated by override; nested mappings merge, the rest replace."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def apply_preset(config: dict) -> dict:
    """Merge config['presets'][config['preset']] into config; 'full' is the base."""
    preset = config.get("preset", "full")
    presets = config.get("presets") or {}
    if preset == "full":
        return copy.deepcopy(config)
    if preset not in presets:
        known = ", ".join(["full", *presets])
        raise ConfigError(f"config: preset {preset!r} does not exist; choose one of: {known}.")
    merged = deep_merge(config, presets[preset])
    merged["preset"] = preset
    return merged


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def validate(config: dict, schema_path: str | Path) -> None:
    """Raise ConfigError naming the first wrong key or value."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        raise ConfigError(f"config: {_where(first)}: {first.message}.")
    _check_references(config)


def _check_references(config: dict) -> None:
    sizes = config["sizes"]
    for name, dims in sizes.items():
        if dims["d_model"] % dims["num_heads"]:
            raise ConfigError(
                f"config: sizes.{name}: d_model {dims['d_model']} is not divisible "
                f"by num_heads {dims['num_heads']}."
            )
    for extra in config.get("timing", {}).get("extra_configurations", []):
        if extra["size"] not in sizes:
            raise ConfigError(
                f"config: timing.extra_configurations names {extra['size']!r}, which is not "
                f"defined under sizes (defined: {', '.join(sizes)})."
            )
    for section, settings in config.items():
        if isinstance(settings, dict) and isinstance(settings.get("sizes"), list):
            for name in settings["sizes"]:
                if name not in sizes:
                    raise ConfigError(
                        f"config: {section}.sizes names {name!r}, which is not defined "
                        f"under sizes (defined: {', '.join(sizes)})."
                    )


def load(config: dict, schema_path: str | Path) -> dict:
    """The config a workflow runs with: preset applied, then validated."""
    merged = apply_preset(config)
    validate(merged, schema_path)
    return merged
