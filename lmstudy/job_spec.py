"""One measuring job's settings, built from the config: its spec.

The workflow passes each measuring job one spec (a JSON object) as its
single `spec` param, and the job's script reads it into the library's own
spec (TimingSpec, CompileSpec, ...), whose fields the keys name. Every
config value a job's result depends on is in its spec, so Snakemake's params
trigger reruns exactly the jobs whose settings changed, and a value walks
config.yaml -> job_spec() -> the rule's param -> the script -> the library.

Defaults live in config.yaml and its schema only: nothing here has a default
of its own. Torch-free: the Snakefile calls it at parse time.
"""

from __future__ import annotations

import dataclasses
import json

from lmstudy import registry
from lmstudy.flops import parameter_count
from lmstudy.model_choice import STANDARD_KEYS, choice_from_config


def model_fields(config: dict, size: str, context_length: int, precision: str) -> dict:
    """The model every measuring job of the study builds (lmstudy.measure.spec.ModelSpec's fields).

    Its `model` is config model: for this size (lmstudy.model_choice.ModelChoice's fields: the
    factory, its label, the depth of the per-module ranges, and the size's keys beyond the four
    dimensions): changing model: reruns every measurement of the model.
    """
    dims = config["sizes"][size]
    return {
        "size": size,
        **{key: dims[key] for key in STANDARD_KEYS},
        "model": model_choice(config, size),
        "context_length": int(context_length),
        "batch_size": config["batch_size"],
        "vocab_size": config["vocab_size"],
        "precision": precision,
        **device_fields(config),
    }


def model_choice(config: dict, size: str) -> dict:
    """config model: for one size, as ModelChoice's fields (its `extra` as lists, as JSON has them)."""
    choice = dataclasses.asdict(choice_from_config(config.get("model"), config["sizes"][size]))
    choice["extra"] = [list(pair) for pair in choice["extra"]]
    return choice


def device_fields(config: dict) -> dict:
    cap = config.get("memory_cap_gb")
    # a float, as the library's spec says (config.yaml may spell 40 for 40.0)
    cap = None if cap is None else float(cap)
    return {"device": config["device"], "tf32": config["tf32"], "memory_cap_gb": cap}


def noise_fields(config: dict) -> dict:
    """How many fresh processes measure a configuration (lmstudy.measure.repeat.NoisePolicy's fields)."""
    noise = config["noise"]
    return {key: noise[key] for key in ("min_processes", "max_processes", "max_spread", "min_gpu_busy")}


def dtype_size(config: dict) -> str:
    """The size whose dtypes section 3 observes: the timing section's smallest (by the built-in
    model's parameter count, the first of equals); dtypes under autocast do not depend on it."""
    sizes = config["timing"]["sizes"]
    return min(sizes, key=lambda s: parameter_count(config["vocab_size"], **config["sizes"][s]))


# A spec key that names a wildcard by another name.
WILDCARD_KEYS = {"ctx": "context_length", "mempass": "pass_name", "impl": "implementation"}


def job_spec(config: dict, job: str, wildcards) -> dict:
    """The spec of one job of kind `job` (a job of lmstudy.registry) with these wildcards, from the config."""
    declared = registry.job(job)
    return declared.spec(config, {name: wildcards[name] for name in declared.wildcards})


def as_param(spec: dict) -> str:
    """The spec as one param: JSON with sorted keys, so that equal settings are equal text."""
    return json.dumps(spec, sort_keys=True)


def wildcards_of(job: str, spec: dict) -> dict:
    """The wildcards a (partial) spec names, by their spec keys; a KeyError names a missing one."""
    return {name: spec[WILDCARD_KEYS.get(name, name)] for name in registry.job(job).wildcards}


# Checking a spec's values: against the config schema's own definitions (lmstudy.config.schema), each
# spec key against the schema of the config value it comes from, so a spec takes what config.yaml
# takes. A spec key is looked for in its section's config block, under its own name or, for the one
# item of a list the workflow ranges over (a wildcard's key), its list's (context_length: the item
# of context_lengths); then at the config's top level, then among a size's keys.

# Spec keys a section's config block names otherwise: the list or value their item or value comes from.
CONFIG_NAMES = {"memory": {"pass_name": "passes"}, "nsys": {"nsys": "executable"}}
# Top-level config keys that no job's spec holds (the run's name, the report's, the comparison's).
NOT_SPEC_KEYS = ("run", "preset", "presets", "sizes", "report", "compare")
# Within a spec's mapping, the keys named otherwise in its config block (the ladder's matmul: n).
NESTED_NAMES = {"matmul": {"sizes": "n"}}
# A section whose jobs take a list's item from another section's block: the precision jobs observe
# the model at the timing section's shortest context length.
BLOCK_OF = {"precision": "timing"}


def _item(schema: dict, defs: dict) -> dict:
    """The item's schema of a list's `schema`, or None where it is not a list."""
    if "$ref" in schema:  # a definition of the schema's own: "#/$defs/<name>"
        schema = {
            **defs[schema["$ref"].rpartition("/")[2]],
            **{k: v for k, v in schema.items() if k != "$ref"},
        }
    kind = schema.get("type")
    return schema.get("items") if kind == "array" or (isinstance(kind, list) and "array" in kind) else None


def _renamed(schema: dict, names: dict) -> dict:
    """An object's schema with its properties named as the spec names them."""
    back = {config: spec for spec, config in names.items()}
    renamed = dict(schema)
    renamed["properties"] = {back.get(k, k): v for k, v in schema["properties"].items()}
    renamed["required"] = [back.get(k, k) for k in schema.get("required", ())]
    return renamed


def _key_schema(config_schema: dict, section: str, key: str, single: bool) -> tuple[dict, str] | None:
    """(the schema of spec key `key` of a `section` job, where in the config it comes from), or None."""
    props = config_schema["properties"]
    sizes = props["sizes"]
    if key == "size":
        return sizes["propertyNames"] | {"type": "string"}, "a size's name"
    if key == "model":
        model = dict(props["model"])
        # The size's keys beyond the four dimensions, as [key, value] pairs (lmstudy.model_choice).
        pair = {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "prefixItems": [{"type": "string"}, sizes["additionalProperties"]["additionalProperties"]],
        }
        model["properties"] = {**model["properties"], "extra": {"type": "array", "items": pair}}
        return model, "model"
    defs = config_schema["$defs"]
    for block_name in (section, BLOCK_OF.get(section)):
        block = props.get(block_name, {}).get("properties", {})
        own = block_name == section
        name = CONFIG_NAMES.get(section, {}).get(key, key)
        if own and name in block and not (single and _item(block[name], defs)):
            found, place = block[name], f"{block_name}.{name}"  # the value itself
        elif (own and single and name in block) or ((single or not own) and f"{key}s" in block):
            # one item of the list (a wildcard's, or another block's: never a typo of a list's name)
            name = name if name in block and own else f"{key}s"
            found, place = _item(block[name], defs), f"an item of {block_name}.{name}"
        else:
            continue
        if key in NESTED_NAMES:
            found = _renamed(found, NESTED_NAMES[key])
        return found, place
    if key in props and key not in NOT_SPEC_KEYS and key not in registry.NAMES:  # not a section's block
        return props[key], key
    if key in sizes["additionalProperties"]["properties"]:
        return sizes["additionalProperties"]["properties"][key], f"sizes.<size>.{key}"
    return None


def spec_keys(job: str) -> tuple[str, ...]:
    """The spec keys a `job` may have whose config value the schema defines (for a typo's suggestion)."""
    from lmstudy import config as study_config

    config_schema = study_config.schema()
    declared = registry.job(job)
    single = [WILDCARD_KEYS.get(w, w) for w in declared.wildcards]
    props = config_schema["properties"]
    candidates = [
        *single,
        *props.get(declared.section, {}).get("properties", {}),
        *props,
        "size",
        *props["sizes"]["additionalProperties"]["properties"],
        *CONFIG_NAMES.get(declared.section, {}),
    ]
    return tuple(
        dict.fromkeys(k for k in candidates if _key_schema(config_schema, declared.section, k, k in single))
    )


def check_spec(job: str, spec: dict) -> None:
    """Raise UserError, one sentence, at the first key of `spec` (a job's) the config would refuse
    where the value comes from: a key no config value makes, or a value the schema's definition of
    its config value refuses (lmstudy.config.schema), or one its checks beyond the schema refuse."""
    import difflib

    import jsonschema

    from lmstudy import config as study_config
    from lmstudy.errors import UserError

    declared = registry.job(job)
    config_schema = study_config.schema()
    single = {WILDCARD_KEYS.get(w, w) for w in declared.wildcards}
    try:
        study_config.check_finite(spec, "the spec")
    except study_config.ConfigError as error:
        raise UserError(str(error)) from None
    for key, value in spec.items():
        found = _key_schema(config_schema, declared.section, key, key in single)
        if found is None:
            close = difflib.get_close_matches(key, spec_keys(job), n=1)
            hint = (
                f"did you mean {close[0]}?" if close else f"the job's keys are {', '.join(spec_keys(job))}."
            )
            raise UserError(f"the spec of job {job} has no key {key}; {hint}")
        key_schema, place = found
        validator = jsonschema.Draft202012Validator({**key_schema, "$defs": config_schema["$defs"]})
        error = study_config.first_error(validator, value)
        if error is not None:
            where = ".".join([key, *map(str, error.absolute_path)])
            said = study_config.error_sentence(error)
            raise UserError(f"the spec's {where}: {said} (the config refuses it as {place} too): fix it.")
    try:
        if {"d_model", "num_heads"} <= set(spec):
            study_config.check_heads("the spec", spec)
        if isinstance(spec.get("noise"), dict) and {"min_processes", "max_processes"} <= set(spec["noise"]):
            study_config.check_noise("the spec's noise", spec["noise"])
        if "rung" in spec:
            study_config.check_rung("the spec's rung", spec["rung"])
    except study_config.ConfigError as error:
        raise UserError(str(error)) from None
