"""Each measuring job's settings are one spec built from the config (lmstudy.job_spec)."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys

import pytest

from lmstudy import job_spec, plan, registry
from lmstudy.cli import complete_spec
from lmstudy.config import ConfigError

from . import specs
from .conftest import REPO
from .specs import config_of

CONFIG_YAML = REPO / "config.yaml"

# The smoke jobs of tests/specs.py, with a timing job of a variant other than naive.
SMOKE_JOBS = {
    **specs.SMOKE_JOBS, "timing": {"size": "tiny", "ctx": 32, "precision": "bf16", "variant": "sdpa"},
}


DISTRIBUTED_TRAINING = {"size", "d_model", "d_ff", "num_layers", "num_heads", "model", "vocab_size",
                        "context_length", "batch_size", "world_size", "device", "warmup_steps", "timed_steps"}


def library_fields(cls, *apart: str) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.init} | set(apart)


def test_every_job_kind_has_a_case():
    assert set(SMOKE_JOBS) == set(registry.jobs())


@pytest.mark.parametrize("job", sorted(SMOKE_JOBS))
def test_a_spec_sets_every_field_of_its_library_spec(job):
    """The library's own defaults are never what a job runs with: its spec names every field."""
    from lmstudy.measure.attention import SweepSpec
    from lmstudy.measure.compile_bench import CompileSpec
    from lmstudy.measure.ladder_bench import BenchSpec, CeilingSpec
    from lmstudy.measure.memory.capture import SnapshotSpec
    from lmstudy.measure.nsys.capture import ProfileSpec
    from lmstudy.measure.timing import TimingSpec

    spec = job_spec.job_spec(config_of("smoke"), job, SMOKE_JOBS[job])
    expected = {
        "timing": library_fields(TimingSpec),
        # the backend is the nsys_backend job's answer, read from its record
        "nsys": library_fields(ProfileSpec) - {"backend"},
        "memory": library_fields(SnapshotSpec),
        # the seed is the library's, no setting of the study
        "attention": library_fields(SweepSpec, "noise") - {"seed"},
        "compile": library_fields(CompileSpec, "noise"),
        "ladder": library_fields(BenchSpec, "noise", "matmul"),
        "nsys_backend": {"backend", "executable", "device"},
        # the study model's dtypes (issue 25): its size, context and model; the device's whole memory
        "precision": {"size", "d_model", "d_ff", "num_layers", "num_heads", "model", "context_length",
                      "batch_size", "vocab_size", "device", "tf32"},
        "norms": {"size", "d_model", "d_ff", "num_layers", "num_heads", "context_length", "batch_size",
                  "vocab_size", "device"},
        # the distributed sections' ranks read their specs as they are (lmstudy.measure.distributed_bench)
        "allreduce": {"backend", "world_size", "device", "sizes_mb", "warmup", "repeats"},
        "ddp": {*DISTRIBUTED_TRAINING, "versions", "bucket_mb"},
        "sharding": DISTRIBUTED_TRAINING,
    }[job]
    assert set(spec) == expected
    if job == "ladder":
        assert set(spec["matmul"]) == library_fields(CeilingSpec)


def test_the_library_specs_have_no_defaults_of_their_own():
    """config.yaml and its schema hold the defaults: a spec class written with one of its own would
    hide a job that lacks the value. Only the attention sweep's seed, no setting of the study, has one."""
    from lmstudy.measure.attention import SweepSpec
    from lmstudy.measure.compile_bench import CompileSpec
    from lmstudy.measure.ladder_bench import BenchSpec, CeilingSpec
    from lmstudy.measure.memory.capture import SnapshotSpec
    from lmstudy.measure.nsys.capture import ProfileSpec
    from lmstudy.measure.repeat import NoisePolicy
    from lmstudy.measure.spec import ModelSpec
    from lmstudy.measure.timing import TimingSpec

    classes = (ModelSpec, TimingSpec, ProfileSpec, SnapshotSpec, SweepSpec, CompileSpec, BenchSpec,
               CeilingSpec, NoisePolicy)
    defaults = {
        f"{cls.__name__}.{f.name}" for cls in classes for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    assert defaults == {"SweepSpec.seed"}


@pytest.mark.parametrize("job", ["timing", "nsys", "memory", "attention", "compile", "ladder"])
def test_a_tests_spec_is_the_smoke_presets_with_its_own_values(job):
    """tests/specs.py: the library's spec of a smoke job, as its script reads it, with a test's values."""
    from .specs import spec_fields, spec_for

    extra = {"backend": "torch"} if job == "nsys" else {}
    fields = spec_fields(job, **extra)
    spec = spec_for(job, **extra)
    assert {k: getattr(spec, k) for k in ("device", "tf32", "memory_cap_gb")} == {
        "device": "cpu", "tf32": False, "memory_cap_gb": None}
    for key in set(fields) - {"noise", "matmul", "model"}:
        value = getattr(spec, key)
        assert (list(value) if isinstance(value, tuple) else value) == fields[key], key
    if job != "attention":
        assert spec_for(job, size="mine", d_model=8, **extra).d_model == 8  # a size of the test's own


def test_the_timing_spec_carries_the_configs_values():
    config = config_of("smoke", lambda c: c["presets"]["smoke"]["timing"].update(warmup_steps=[0, 3]))
    spec = job_spec.job_spec(config, "timing", SMOKE_JOBS["timing"])
    assert spec["warmup_steps"] == [0, 3]
    assert spec["timed_steps"] == config["timing"]["timed_steps"]
    assert spec["d_ff"] == config["sizes"]["tiny"]["d_ff"]
    assert spec["noise"]["max_processes"] == config["noise"]["max_processes"]


# The jobs that measure the study's model (config model:), the distributed sections' training among them
# (issue 42: on the built-in model and on the user's own).
MODEL_JOBS = {"timing", "nsys", "memory", "compile", "ladder", "precision", "ddp", "sharding"}


@pytest.mark.parametrize(("edit", "changed"), [
    (lambda c: c["timing"].update(warmup_steps=[0, 2]), {"timing"}),
    (lambda c: c["nsys"].update(profiled_steps=2), {"nsys"}),
    (lambda c: c["noise"].update(max_spread=0.1), {"timing", "attention", "compile", "ladder"}),
    (lambda c: c.update(tf32=True),
     {"timing", "nsys", "memory", "attention", "compile", "ladder", "precision"}),
    # issue 25: model: reruns every measurement of the model, the precision job's dtypes of it among
    # them (not the norms' built-in RMSNorm study)
    (lambda c: c["model"].update(name="mine"), MODEL_JOBS),
    (lambda c: c["model"].update(factory="tests/fixtures/models/encoder_lm.py:build"), MODEL_JOBS),
    (lambda c: c["model"].update(range_depth=2), MODEL_JOBS),
    # the smallest size's dimensions: every job of that size, the precision job's model and the
    # distributed sections' training among them, and the norms' built-in RMSNorm study
    (lambda c: c["sizes"]["tiny"].update(d_ff=128), MODEL_JOBS | {"norms"}),
    (lambda c: c["ddp"].update(bucket_mb=[5]), {"ddp"}),
    (lambda c: c["comm"].update(repeats=7), {"allreduce"}),
])
def test_a_changed_setting_changes_the_param_of_exactly_the_jobs_it_concerns(edit, changed):
    before = config_of("smoke")
    after = copy.deepcopy(before)
    edit(after)
    differs = {
        job for job, wildcards in SMOKE_JOBS.items()
        if job_spec.as_param(job_spec.job_spec(before, job, wildcards))
        != job_spec.as_param(job_spec.job_spec(after, job, wildcards))
    }
    assert differs == changed


def test_the_param_is_the_same_text_for_the_same_settings_in_any_order():
    spec = job_spec.job_spec(config_of("smoke"), "timing", SMOKE_JOBS["timing"])
    assert job_spec.as_param(dict(reversed(spec.items()))) == job_spec.as_param(spec)
    assert json.loads(job_spec.as_param(spec)) == spec


def test_a_spec_by_hand_is_completed_as_the_workflow_builds_it(tmp_path):
    wildcards = SMOKE_JOBS["timing"]
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"size": "tiny", "context_length": 32, "precision": "bf16", "variant": "sdpa",
                                "timed_steps": 4}))
    read = complete_spec("timing", json.loads(path.read_text()), CONFIG_YAML, "smoke")
    assert read == {**job_spec.job_spec(config_of("smoke"), "timing", wildcards), "timed_steps": 4}


def test_the_model_travels_in_the_spec_with_a_sizes_own_keys():
    """config model: and a size's keys beyond the four reach the library's ModelChoice through the spec."""
    from lmstudy.measure.spec import from_fields
    from lmstudy.measure.timing import TimingSpec
    from lmstudy.model_choice import ModelChoice

    factory = "tests/fixtures/models/encoder_lm.py:build"

    def edit(c):
        c["model"].update(factory=factory, name="encoder")
        c["presets"]["smoke"]["sizes"]["tiny"]["dropout"] = 0.0

    spec = job_spec.job_spec(config_of("smoke", edit), "timing", SMOKE_JOBS["timing"])
    assert "dropout" not in spec
    assert spec["model"] == {"factory": factory, "name": "encoder", "range_depth": 4,
                             "extra": [["dropout", 0.0]]}
    read = from_fields(TimingSpec, json.loads(job_spec.as_param(spec)))
    expected = ModelChoice(factory=factory, name="encoder", range_depth=4, extra=(("dropout", 0.0),))
    assert read.model == expected


def test_the_precision_job_observes_the_model_at_its_smallest_size_and_shortest_context():
    factory = "tests/fixtures/models/encoder_lm.py:build"

    def edit(c):
        c["model"].update(factory=factory, name="encoder")
        c["presets"]["smoke"]["timing"]["sizes"] = ["oversized", "tiny"]

    config = config_of("smoke", edit)
    spec = job_spec.job_spec(config, "precision", {})
    assert spec["size"] == "tiny" and spec["d_ff"] == config["sizes"]["tiny"]["d_ff"]
    assert spec["context_length"] == min(config["timing"]["context_lengths"])
    assert spec["model"] == job_spec.job_spec(config, "timing", SMOKE_JOBS["timing"])["model"]
    assert spec["model"]["name"] == "encoder"
    # By hand: a factory alone, the rest from the preset.
    read = complete_spec("precision", {"model": factory}, CONFIG_YAML, "smoke")
    assert read["model"]["factory"] == factory and read["size"] == "tiny"


def test_a_spec_by_hand_may_name_the_factory_alone():
    spec = complete_spec("timing", {
        "size": "tiny", "context_length": 32, "precision": "bf16", "variant": "sdpa",
        "model": "tests/fixtures/models/encoder_lm.py:build"}, CONFIG_YAML, "smoke")
    assert spec["model"]["factory"] == "tests/fixtures/models/encoder_lm.py:build"
    assert spec["model"]["range_depth"] == 4  # config's default for a model of the user's own


def test_the_variants_are_checked_against_the_one_list():
    with pytest.raises(ConfigError, match=r"timing\.variants\.1"):
        config_of("full", lambda c: c["timing"].update(variants=["naive", "flash"]))
    config = config_of("full", lambda c: c["timing"].update(variants=list(plan.VARIANTS)))
    assert config["timing"]["variants"] == list(plan.VARIANTS)


def test_the_registry_is_read_without_torch_pandas_or_the_report():
    """The Snakefile reads every section's jobs and result files at parse time, on a submit host
    that may have no torch: the sections' jobs.py import neither torch nor pandas, nor their
    section's report code."""
    code = (
        "import sys; from lmstudy import products, registry; jobs = registry.jobs(); products.registered(); "
        "heavy = {'torch', 'pandas', 'matplotlib'} & set(sys.modules); "
        "report = [m for m in sys.modules if m.endswith('.section') or m.endswith('.tables')]; "
        "print(len(jobs), sorted(heavy), report)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split(maxsplit=1) == [str(len(registry.jobs())), "[] []\n"], done.stdout
