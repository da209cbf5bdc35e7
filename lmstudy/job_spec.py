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

from lmstudy import plan
from lmstudy.flops import parameter_count
from lmstudy.model_choice import STANDARD_KEYS, choice_from_config


def _model(config: dict, size: str, context_length: int, precision: str) -> dict:
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
        **_device(config),
    }


def model_choice(config: dict, size: str) -> dict:
    """config model: for one size, as ModelChoice's fields (its `extra` as lists, as JSON has them)."""
    choice = dataclasses.asdict(choice_from_config(config.get("model"), config["sizes"][size]))
    choice["extra"] = [list(pair) for pair in choice["extra"]]
    return choice


def _device(config: dict) -> dict:
    cap = config.get("memory_cap_gb")
    # a float, as the library's spec says (config.yaml may spell 40 for 40.0)
    cap = None if cap is None else float(cap)
    return {"device": config["device"], "tf32": config["tf32"], "memory_cap_gb": cap}


def _noise(config: dict) -> dict:
    """How many fresh processes measure a configuration (lmstudy.measure.repeat.NoisePolicy's fields)."""
    noise = config["noise"]
    return {key: noise[key] for key in ("min_processes", "max_processes", "max_spread", "min_gpu_busy")}


def _timing(config: dict, w: dict) -> dict:
    timing = config["timing"]
    return {
        **_model(config, w["size"], w["ctx"], w["precision"]),
        "variant": w["variant"],
        "passes": plan.timing_passes(w["variant"], timing["passes"]),
        "warmup_steps": timing["warmup_steps"],
        "timed_steps": timing["timed_steps"],
        "noise": _noise(config),
    }


def _nsys_backend(config: dict, w: dict) -> dict:
    nsys = config["nsys"]
    return {"backend": nsys["backend"], "executable": nsys["executable"], "device": config["device"]}


def _nsys(config: dict, w: dict) -> dict:
    nsys = config["nsys"]
    return {
        **_model(config, w["size"], w["ctx"], w["precision"]),
        "passes": nsys["passes"],
        "warmup_steps": nsys["warmup_steps"],
        "profiled_steps": nsys["profiled_steps"],
    }


def _memory(config: dict, w: dict) -> dict:
    memory = config["memory"]
    return {
        **_model(config, w["size"], w["ctx"], w["precision"]),
        "pass_name": w["mempass"],
        "warmup_steps": memory["warmup_steps"],
        "max_entries": memory["max_entries"],
        "stacks": memory["stacks"],
    }


def _attention(config: dict, w: dict) -> dict:
    attention = config["attention"]
    return {
        "implementation": w["impl"],
        "precision": w["precision"],
        "head_dim": int(w["head_dim"]),
        "seq_lens": attention["seq_lens"],
        "batch_size": attention["batch_size"],
        "steps": attention["steps"],
        "warmup": attention["warmup"],
        **_device(config),
        "noise": _noise(config),
    }


def _compile(config: dict, w: dict) -> dict:
    compiled = config["compile"]
    return {
        **_model(config, w["size"], w["ctx"], w["precision"]),
        "attention": w["attention"],
        "passes": compiled["passes"],
        "warmup_steps": compiled["warmup_steps"],
        "timed_steps": compiled["timed_steps"],
        "noise": _noise(config),
    }


def _ladder(config: dict, w: dict) -> dict:
    ladder = config["ladder"]
    model = _model(config, w["size"], w["ctx"], "bf16")
    del model["precision"]  # the rung sets its own
    matmul = ladder["matmul"]
    return {
        **model,
        "rung": w["rung"],
        "warmup_steps": ladder["warmup_steps"],
        "timed_steps": ladder["timed_steps"],
        "profile_steps": ladder["profile_steps"],
        "noise": _noise(config),
        "matmul": {
            "sizes": matmul["n"],
            "warmup_s": float(matmul["warmup_s"]),
            "bursts": matmul["bursts"],
            "burst_products": matmul["burst_products"],
        },
    }


def _precision(config: dict, w: dict) -> dict:
    """The toy model's and the study model's dtypes under autocast (section 3): the study model
    (config model:) at its smallest size and shortest context (dtype_size)."""
    model = _model(config, dtype_size(config), min(config["timing"]["context_lengths"]), "fp32")
    del model["precision"], model["memory_cap_gb"]  # autocast's dtypes, each in turn; the whole device
    return model


def dtype_size(config: dict) -> str:
    """The size whose dtypes section 3 observes: the timing section's smallest (by the built-in
    model's parameter count, the first of equals); dtypes under autocast do not depend on it."""
    sizes = config["timing"]["sizes"]
    return min(sizes, key=lambda s: parameter_count(config["vocab_size"], **config["sizes"][s]))


def _norms(config: dict, w: dict) -> dict:
    """The study model of one size at the timing section's shortest context (section 3 b)."""
    model = _model(config, w["size"], min(config["timing"]["context_lengths"]), "fp32")
    del model["precision"], model["tf32"], model["memory_cap_gb"]  # fp32 and the whole device, always
    del model["model"]  # the norms' experiment builds the built-in model: it studies its RMSNorm
    return model


# section's job -> (its wildcards, the function that builds its spec)
BUILDERS = {
    "timing": (("size", "ctx", "precision", "variant"), _timing),
    "nsys_backend": ((), _nsys_backend),
    "nsys": (("size", "ctx", "precision"), _nsys),
    "memory": (("size", "ctx", "mempass", "precision"), _memory),
    "attention": (("impl", "precision", "head_dim"), _attention),
    "compile": (("size", "ctx", "precision", "attention"), _compile),
    "ladder": (("size", "ctx", "rung"), _ladder),
    "precision": ((), _precision),
    "norms": (("size",), _norms),
}
# A spec key that names a wildcard by another name.
WILDCARD_KEYS = {"ctx": "context_length", "mempass": "pass_name", "impl": "implementation"}


def job_spec(config: dict, job: str, wildcards) -> dict:
    """The spec of one job of kind `job` (a key of BUILDERS) with these wildcards, from the config."""
    names, build = BUILDERS[job]
    return build(config, {name: wildcards[name] for name in names})


def as_param(spec: dict) -> str:
    """The spec as one param: JSON with sorted keys, so that equal settings are equal text."""
    return json.dumps(spec, sort_keys=True)


def wildcards_of(job: str, spec: dict) -> dict:
    """The wildcards a (partial) spec names, by their spec keys; a KeyError names a missing one."""
    names, _ = BUILDERS[job]
    return {name: spec[WILDCARD_KEYS.get(name, name)] for name in names}
