"""The study's configuration: presets merged in, then validated.

Layers, each over the one before: config.yaml, the chosen preset,
--configfile files, --config values. What a user types for one run wins
over what the study's file says for a whole preset.

Used by the Snakefile at parse time, so it imports neither torch nor
anything that touches a GPU.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import yaml


class ConfigError(Exception):
    """The config is wrong; the message is one sentence naming what to fix."""


# The study's own config.yaml has about a thousand values. YAML aliases let a
# file of a few hundred bytes stand for billions of them (each alias is one
# shared object, counted here every time it is used, as validation and every
# later walk would visit it), so anything far beyond the study's size is
# refused before it is walked.
MAX_VALUES = 100_000
MAX_DEPTH = 50


def check_size(config, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH) -> None:
    """Raise ConfigError when `config` holds over `max_values` values or nests over `max_depth` deep."""
    stack, count = [(config, 0)], 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_values or depth > max_depth:
            raise ConfigError(
                f"config: it holds more than {max_values} values or nests more than {max_depth} deep "
                "(YAML aliases repeated within each other?), far beyond what the study needs: "
                "write the values out in config.yaml or your --configfile."
            )
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)


def check_yaml_file(path: str | Path) -> None:
    """Raise ConfigError, with the line, where the file at `path` is not YAML: Snakemake's own message
    says only that the file is not valid JSON or YAML. A file that is not there is not checked."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not text"
        raise ConfigError(f"{path}: cannot be read ({reason}).") from None
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark, opened = getattr(error, "problem_mark", None), getattr(error, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(error, "problem", None) or "not YAML"
        if opened is not None and mark is not None and opened.line != mark.line:
            problem += f" ({error.context} at line {opened.line + 1})"
        raise ConfigError(f"{path}: {where}: {problem}, so it is not valid YAML: fix it there.") from None


def check_unique_keys(path: str | Path) -> None:
    """Raise ConfigError where the YAML file at `path` writes one key twice in a mapping.

    YAML loaders keep the last of the two without a word, so a size written
    twice measures one of them only. The file's node tree is walked as
    composed, each node once (an alias is its anchor's node, not a copy).
    """
    try:
        root = yaml.compose(Path(path).read_text(), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # Snakemake's own loader names a file it cannot read
    seen, stack = set(), [(root, "the top level")]
    while stack:
        node, where = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first = {}
            for key, value in node.value:
                name = (key.tag, key.value) if isinstance(key, yaml.ScalarNode) else None
                if name is not None and name in first:
                    raise ConfigError(
                        f"{path}: the key {key.value!r} is written twice under {where} (lines "
                        f"{first[name].start_mark.line + 1} and {key.start_mark.line + 1}), and only the "
                        "last would count: remove or rename one of them."
                    )
                if name is not None:
                    first[name] = key
                stack.append((value, repr(key.value) if isinstance(key, yaml.ScalarNode) else where))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, where) for item in node.value)


def deep_merge(base: dict, override: dict) -> dict:
    """Return base updated by override; nested mappings merge, the rest replace."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def apply_preset(config: dict, overrides: list[dict] = ()) -> dict:
    """Merge config['presets'][config['preset']] into config, then `overrides` over both.

    'full' is the base and has no entry. `overrides` are the command line's
    layers (--configfile files, then --config), which win over the preset.
    """

    def over(base: dict) -> dict:
        for layer in overrides:
            base = deep_merge(base, layer)
        return base

    # The preset and the presets themselves may come from the command line too.
    for layer in (config, *overrides):
        check_size(layer)
    config = over(copy.deepcopy(config))
    preset = config.get("preset", "full")
    presets = config.get("presets") or {}
    _check_presets(presets)
    if not isinstance(preset, str):
        known = ", ".join(["full", *presets])
        raise ConfigError(f"config: preset: {preset!r} is not a preset's name; name one of: {known}.")
    if preset != "full" and preset not in presets:
        known = ", ".join(["full", *presets])
        raise ConfigError(f"config: preset {preset!r} does not exist; choose one of: {known}.")
    merged = over(deep_merge(config, presets[preset])) if preset != "full" else config
    merged["preset"] = preset
    return merged


def _check_presets(presets) -> None:
    """Presets are a mapping of names to mappings of overrides, and do not chain (no `preset:` inside one)."""
    if not isinstance(presets, Mapping):
        raise ConfigError(
            "config: presets: must map each preset's name to its overrides, "
            f"not be a {type(presets).__name__}."
        )
    for name, overrides in presets.items():
        if not isinstance(overrides, Mapping):
            raise ConfigError(
                f"config: presets.{name}: must be a mapping of overrides, not a {type(overrides).__name__}."
            )
        if "preset" in overrides:
            raise ConfigError(
                f"config: presets.{name}: sets preset: {overrides['preset']!r}, but presets do not chain: "
                f"copy the overrides you want into presets.{name} and remove its preset key."
            )


def typed_command_line(values) -> dict:
    """--config values with their nested values read as YAML.

    Snakemake types a top-level value (batch_size=8 is a number, but true is
    a string, which is made a boolean here) but leaves
    every value inside a mapping or list a string ('timing={timed_steps: 5}'
    gives '5'); read those as YAML, as config.yaml would.
    """

    def inner(value):
        if isinstance(value, Mapping):
            return {key: inner(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [inner(item) for item in value]
        if isinstance(value, str):
            try:
                parsed = yaml.safe_load(value)
            except yaml.YAMLError:
                return value
            # A leaf stays a leaf: '{a: b}' here was a quoted string.
            return value if isinstance(parsed, (dict, list)) else parsed
        return value

    def top(value):
        if isinstance(value, (Mapping, list, tuple)):
            return inner(value)
        # Snakemake reads True and False as booleans, but not true and false,
        # which config.yaml spells (tf32=true must mean what `tf32: true` does).
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        return value

    return {key: top(value) for key, value in values.items()}


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _shortened(message: str, limit: int = 300) -> str:
    """A validation message cut to `limit` characters: it quotes the wrong value, which may be huge."""
    return message if len(message) <= limit else f"{message[:limit]}... (cut)"


def code_defs() -> dict:
    """The schema's $defs whose values the code defines: each list written once, there."""
    from lmstudy.plan import VARIANTS

    return {"variant": {"enum": list(VARIANTS)}}


@functools.cache
def _schema(schema_path: Path) -> dict:
    schema = yaml.safe_load(schema_path.read_text())
    for name, definition in code_defs().items():
        schema["$defs"][name].update(definition)
    return schema


def schema(schema_path: str | Path = None) -> dict:
    """The config's JSON schema, its code-defined lists filled in (code_defs); a copy to change freely."""
    return copy.deepcopy(_schema(Path(schema_path or STUDY_SCHEMA).resolve()))


# YAML 1.1 (PyYAML) reads a number with an exponent but without a dot or the exponent's sign, such as
# 1e308, as text; YAML 1.2 and JSON do not.
_DOTLESS_FLOAT = re.compile(r"^[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+$")


def error_sentence(error: jsonschema.ValidationError) -> str:
    """What a validation error says of its value: the value cut where long, never the reason."""
    message = error.message
    quoted = repr(error.instance)
    if len(quoted) > 80 and message.startswith(quoted):
        # The reason follows the value, which may be long: the value is cut, never the reason.
        message = f"{quoted[:40]}... ({len(str(error.instance))} characters){message[len(quoted):]}"
    if error.validator in ("maxLength", "maxItems"):
        message += f" (at most {error.validator_value})"
    if error.validator == "type" and isinstance(error.instance, str) and _DOTLESS_FLOAT.match(error.instance):
        mantissa, _, exponent = error.instance.lower().partition("e")
        mantissa = mantissa if "." in mantissa else f"{mantissa}.0"
        number = f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"
        message += f" (YAML reads {error.instance} as text: write {number})"
    return _shortened(message)


def first_error(validator: jsonschema.protocols.Validator, instance) -> jsonschema.ValidationError | None:
    """The first error by path, so that the same mistake is named the same way every time."""
    def order(error):
        # At one place, the tighter of two bounds first ($ref: step_count, minimum: 2 gives two minimums).
        bound = error.validator_value if isinstance(error.validator_value, (int, float)) else 0
        tighter = -bound if error.validator in ("minimum", "exclusiveMinimum") else bound
        return [str(p) for p in error.absolute_path], tighter if "imum" in str(error.validator) else 0

    errors = sorted(validator.iter_errors(instance), key=order)
    return errors[0] if errors else None


def check_finite(value, where: str = "config") -> None:
    """Raise ConfigError at a number that is not finite (NaN, infinity): no setting means either,
    and the schema's bounds let NaN through (every comparison with it is false)."""
    stack = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            place = ".".join(map(str, path)) or "(top level)"
            raise ConfigError(
                f"{where}: {place}: {item!r} is not a number any setting takes: give a finite one."
            )
        if isinstance(item, Mapping):
            stack.extend((v, [*path, k]) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, [*path, i]) for i, v in enumerate(item))


def validate(config: dict, schema_path: str | Path) -> None:
    """Raise ConfigError naming the first wrong key or value."""
    check_finite(config)
    first = first_error(jsonschema.Draft202012Validator(schema(schema_path)), config)
    if first is not None:
        raise ConfigError(f"config: {_where(first)}: {error_sentence(first)}.")
    _check_references(config)


def check_run_name(name: str, where: str = "config: run") -> None:
    """Raise ConfigError where `name` cannot name a run (a folder of results/): the sentence begins
    with `where`. The config's run and a comparison's two runs are checked alike."""
    if name.startswith("."):
        raise ConfigError(
            f"{where}: {name!r} would put results outside results/ "
            "(or hide them): name the run with a letter, digit or '_' first."
        )
    if name.startswith("-"):
        # The report's and comparison's scripts get the name as an argument (--run NAME).
        raise ConfigError(
            f"{where}: {name!r} starts with '-', which a command line takes for an option: "
            "name the run with a letter, digit or '_' first."
        )
    if "_vs_" in name:
        raise ConfigError(
            f"{where}: {name!r} contains '_vs_', which separates the two runs of a "
            "comparison (report/compare/<A>_vs_<B>/): name the run without it."
        )


def _check_references(config: dict) -> None:
    check_run_name(config["run"])
    sizes = config["sizes"]
    for name, dims in sizes.items():
        check_heads(f"config: sizes.{name}", dims)
    for extra in config.get("timing", {}).get("extra_configurations", []):
        if extra["size"] not in sizes:
            raise ConfigError(
                f"config: timing.extra_configurations names {extra['size']!r}, which is not "
                f"defined under sizes (defined: {', '.join(sizes)})."
            )
    _check_rungs(config)
    if config.get("noise"):
        check_noise("config: noise", config["noise"])
    for section, settings in config.items():
        if isinstance(settings, dict) and isinstance(settings.get("sizes"), list):
            for name in settings["sizes"]:
                if name not in sizes:
                    raise ConfigError(
                        f"config: {section}.sizes names {name!r}, which is not defined "
                        f"under sizes (defined: {', '.join(sizes)})."
                    )


def _check_rungs(config: dict) -> None:
    for rung in config.get("ladder", {}).get("rungs", []):
        check_rung("config: ladder.rungs", rung)


# The checks beyond the schema's of one value, each a sentence that begins with `where` (the place
# in the config, or in a job's spec: lmstudy.job_spec.check_spec).


def check_heads(where: str, dims: Mapping) -> None:
    """The heads divide d_model."""
    if dims["d_model"] % dims["num_heads"]:
        raise ConfigError(
            f"{where}: d_model {dims['d_model']} is not divisible by num_heads {dims['num_heads']}: "
            "choose a num_heads that divides it."
        )


def check_noise(where: str, noise: Mapping) -> None:
    """max_processes is not below min_processes."""
    if noise["max_processes"] < noise["min_processes"]:
        raise ConfigError(
            f"{where}.max_processes ({noise['max_processes']}) is below {where.rpartition(' ')[2]}"
            f".min_processes ({noise['min_processes']}): raise max_processes or lower min_processes."
        )


def check_rung(where: str, rung: str) -> None:
    """The rung is one the benchmark defines (lmstudy.ladder_rungs, torch-free)."""
    from lmstudy.ladder_rungs import RUNGS

    if rung not in RUNGS:
        raise ConfigError(
            f"{where} names {rung!r}, which is not a rung of the ladder (the rungs: {', '.join(RUNGS)})."
        )


def load(config: dict, schema_path: str | Path, overrides: list[dict] = ()) -> dict:
    """The config a workflow runs with: preset applied, `overrides` over it, then validated.

    `config` is what Snakemake merged (config.yaml under --configfile and
    --config); `overrides` are those command-line layers again, in order,
    so that they also win over the preset.
    """
    merged = apply_preset(config, overrides)
    validate(merged, schema_path)
    return merged


def check_run_to_report(run: str, records: list[str], results: Path = Path("results")) -> None:
    """Raise ConfigError where `snakemake --report` would report jobs of run `run` that did not run
    here: `records`, the benchmark file of every job of the config, are not all there, so the
    config (preset, run) is not the one the run was made with."""
    missing = [r for r in records if not Path(r).exists()]
    if not missing:
        return
    runs = sorted(p.name for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    here = f"the runs here are {', '.join(runs)}" if runs else "no run has results here yet"
    raise ConfigError(
        f"snakemake --report: {len(missing)} of the {len(records)} jobs of run {run!r} with this config "
        f"have not run here ({missing[0]} does not exist; {here}): give --report the same --config as "
        f"the run it reports (--config preset=<its preset> run={runs[0] if runs else '<its name>'})."
    )


# Beyond this many jobs a plan is far larger than any study's (the full preset plans a few hundred), and
# Snakemake's DAG alone takes minutes and gigabytes to build (60,000 jobs: over 5 minutes and 1.5 GB).
MANY_JOBS = 2000


def many_jobs_warning(records: list[str], benchmarks: str, limit: int = MANY_JOBS) -> str | None:
    """A sentence where the plan's jobs (their benchmark records, `benchmarks`/<section>/...) are over
    `limit`, naming the sections that plan most; None otherwise."""
    if len(records) <= limit:
        return None
    counts: dict[str, int] = {}
    for record in records:
        section = Path(record).relative_to(benchmarks).parts[0]
        counts[section] = counts.get(section, 0) + 1
    largest = sorted(counts.items(), key=lambda item: -item[1])[:2]
    named = " and ".join(f"{section} {count:,}" for section, count in largest)
    return (
        f"this config plans {len(records):,} jobs ({named}), far more than the study needs: "
        f"Snakemake takes minutes to plan them before anything runs; stop it (Ctrl-C) and cut the "
        f"sections' lists (sizes, context_lengths) unless you meant it."
    )


def report_target(argv: list[str]) -> Path | None:
    """The file `snakemake --report [FILE]` is to write (Snakemake's default report.html), None without it."""
    for i, word in enumerate(argv):
        if word.startswith("--report="):
            return Path(word.partition("=")[2])
        if word == "--report":
            following = argv[i + 1] if i + 1 < len(argv) else ""
            return Path(following if following and not following.startswith("-") else "report.html")
    return None


def check_writable(path: Path, what: str) -> None:
    """Raise ConfigError where the file `path` cannot be written: a folder, in a folder that does not
    exist, or in one this user cannot write (said before Snakemake works for minutes, then fails)."""
    if path.is_dir():
        raise ConfigError(f"{what}: {path} is a folder: give the path of the file to write.")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConfigError(f"{what}: the folder {folder} of {path} does not exist: create it "
                          f"(mkdir -p {folder}) or give a path in a folder that exists.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{what}: the folder {folder} is read-only to this user: give a path in a folder "
                          "you can write.")


def check_writable_folders(folders: list[str | Path]) -> None:
    """Raise ConfigError where a folder the workflow writes (or the nearest existing folder above it)
    is read-only to this user."""
    for folder in map(Path, folders):
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(
                f"{existing} is read-only to this user, and the workflow writes {folder}/ there: make it "
                f"writable (chmod u+w {existing}) or run from a folder you can write."
            )


# This checkout's study: what a script run by hand takes for a value it is not given.
STUDY_CONFIG = Path(__file__).resolve().parent.parent / "config.yaml"
STUDY_SCHEMA = STUDY_CONFIG.parent / "workflow/schemas/config.schema.yaml"


def full_study() -> dict:
    """The full study's grids, by section (and its sizes): this checkout's config.yaml under its own
    preset, which a smaller run's report compares itself with (lmstudy.report.coverage). The
    workflow passes it to the report job as a param, so the job reads no config file itself."""
    from lmstudy.registry import NAMES

    study = load(yaml.safe_load(STUDY_CONFIG.read_text()), STUDY_SCHEMA)
    return {key: study[key] for key in ("sizes", *NAMES) if key in study}


def study_value(*keys: str):
    """The value at `keys` (e.g. "compare", "min_effect") of config.yaml as the workflow loads it (its
    preset merged in, validated): a joining script's default when run by hand, so that the number is
    written in config.yaml only. The workflow always passes the value itself."""
    value = load(yaml.safe_load(STUDY_CONFIG.read_text()), STUDY_SCHEMA)
    for key in keys:
        value = value[key]
    return value
