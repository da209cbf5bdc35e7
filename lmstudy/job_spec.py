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
