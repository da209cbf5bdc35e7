"""The library's specs for tests, built as the workflow builds them.

The spec classes (TimingSpec, CompileSpec, ...) have no defaults of their
own: config.yaml and its schema hold them. A test takes the spec a job of
the smoke preset gets (lmstudy.job_spec.job_spec, the function the Snakefile
calls) and lays its own values over it:

    spec_for("timing", precision="fp32", warmup_steps=(0, 2), d_model=32)

A value that names a job's wildcard (size, context_length, precision,
variant, ...) builds that configuration's spec; a size the config lacks is
the smoke preset's `tiny` under that name, its dimensions the test's own.
"""

from __future__ import annotations

import copy
import functools

import yaml

from lmstudy import job_spec as builder
from lmstudy import registry
from lmstudy.config import load
from lmstudy.model_choice import STANDARD_KEYS

from .conftest import REPO

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"

# One job of each kind of the smoke preset: the configuration a test gets unless it names another.
SMOKE_JOBS = {
    "timing": {"size": "tiny", "ctx": 32, "precision": "fp32", "variant": "naive"},
    "nsys_backend": {},
    "nsys": {"size": "tiny", "ctx": 32, "precision": "fp32"},
    "memory": {"size": "tiny", "ctx": 32, "mempass": "train_step", "precision": "bf16"},
    "attention": {"impl": "naive", "precision": "fp32", "head_dim": "8"},
    "compile": {"size": "tiny", "ctx": "32", "precision": "fp32", "attention": "naive"},
    "ladder": {"size": "tiny", "ctx": "32", "rung": "bf16-sdpa"},
    "precision": {},
    "norms": {"size": "tiny"},
    "allreduce": {"backend": "gloo", "world_size": "2"},
    "ddp": {"size": "tiny", "world_size": "2"},
    "sharding": {"size": "tiny", "world_size": "2"},
}

# The spec keys a job's script reads apart from its library spec (a NoisePolicy, a CeilingSpec).
APART = {"attention": ("noise",), "compile": ("noise",), "ladder": ("noise", "matmul")}


def config_of(preset: str = "smoke", edit=None) -> dict:
    """config.yaml under `preset`, validated and with its defaults, as the Snakefile loads it."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["preset"] = preset
    if edit:
        edit(config)
    return load(config, SCHEMA)


@functools.cache
def _smoke() -> dict:
    return config_of("smoke")


def spec_fields(job: str, config: dict | None = None, **overrides) -> dict:
    """The spec (a dict, as a job's script reads it) of a `job` of `config` (the smoke preset), with
    `overrides` laid over it."""
    config = copy.deepcopy(config if config is not None else _smoke())
    wildcards = dict(SMOKE_JOBS[job])
    for name in registry.job(job).wildcards:
        key = builder.WILDCARD_KEYS.get(name, name)
        if key in overrides:
            wildcards[name] = overrides[key]
    size = wildcards.get("size")
    if size is not None and size not in config["sizes"]:
        config["sizes"][size] = {k: overrides.get(k, config["sizes"]["tiny"][k]) for k in STANDARD_KEYS}
    return {**builder.job_spec(config, job, wildcards), **overrides}


def _library_class(job: str):
    from lmstudy.measure.attention import SweepSpec
    from lmstudy.measure.compile_bench import CompileSpec
    from lmstudy.measure.ladder_bench import BenchSpec
    from lmstudy.measure.memory.capture import SnapshotSpec
    from lmstudy.measure.nsys.capture import ProfileSpec
    from lmstudy.measure.timing import TimingSpec

    return {"timing": TimingSpec, "nsys": ProfileSpec, "memory": SnapshotSpec, "attention": SweepSpec,
            "compile": CompileSpec, "ladder": BenchSpec}[job]


def spec_for(job: str, config: dict | None = None, **overrides):
    """The library's spec of a `job` (timing, nsys, memory, attention, compile, ladder), as its script
    makes it (lmstudy.measure.spec.from_fields), of spec_fields(job, config, **overrides).

    An nsys spec needs its `backend` (the nsys_backend job's answer in the workflow). The noise policy
    of attention, compile and ladder, and the ladder's matmul ceiling, are noise_for() and ceiling_for().
    """
    from lmstudy.measure.spec import from_fields

    fields = spec_fields(job, config, **overrides)
    for key in APART.get(job, ()):
        del fields[key]
    return from_fields(_library_class(job), fields)


def noise_for(config: dict | None = None, **overrides):
    """The NoisePolicy of the smoke preset (or `config`), with `overrides`."""
    from lmstudy.measure.repeat import NoisePolicy

    return NoisePolicy(**{**spec_fields("compile", config)["noise"], **overrides})


def ceiling_for(config: dict | None = None, **overrides):
    """The ladder's CeilingSpec of the smoke preset (or `config`), with `overrides`."""
    from lmstudy.measure.ladder_bench import CeilingSpec
    from lmstudy.measure.spec import from_fields

    return from_fields(CeilingSpec, {**spec_fields("ladder", config)["matmul"], **overrides})
