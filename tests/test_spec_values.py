"""Issue 40: a job's spec takes what the config takes. `lmstudy measure` and `lmstudy spec` check a
spec's values against the config schema's own definitions (lmstudy.job_spec.check_spec), and say a
mistake in one sentence that names the key and the fix. In-process: no torch, no measurement."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from lmstudy import job_spec, registry
from lmstudy.command import main
from lmstudy.config import ConfigError, load
from lmstudy.errors import UserError

from .conftest import REPO
from .specs import SCHEMA, SMOKE_JOBS, config_of, spec_fields

NOISE = {"min_processes": 1, "max_processes": 2, "max_spread": 0.1, "min_gpu_busy": 0.5}


@pytest.mark.parametrize("preset", ["smoke", "quick", "full"])
@pytest.mark.parametrize("job", sorted(SMOKE_JOBS))
def test_every_spec_the_workflow_builds_passes_the_check(job, preset):
    config = config_of(preset)
    config["sizes"].setdefault("tiny", config_of("smoke")["sizes"]["tiny"])
    job_spec.check_spec(job, spec_fields(job, config))


# (job, spec key, wrong value, the same value where the config has it, over the preset): the config
# refuses it, and so does the spec.
SAME_RULES = [
    ("timing", "timed_steps", -3, {"timing": {"timed_steps": -3}}),
    ("timing", "timed_steps", 1, {"timing": {"timed_steps": 1}}),
    ("timing", "context_length", 0, {"timing": {"context_lengths": [0]}}),
    ("timing", "context_length", "long", {"timing": {"context_lengths": ["long"]}}),
    ("timing", "precision", "fp8", {"timing": {"precisions": ["fp8"]}}),
    ("timing", "variant", "fastest", {"timing": {"variants": ["fastest"]}}),
    ("timing", "passes", ["fwd"], {"timing": {"passes": ["fwd"]}}),
    ("timing", "warmup_steps", 3, {"timing": {"warmup_steps": 3}}),
    ("timing", "d_model", "big", {"sizes": {"tiny": {"d_model": "big"}}}),
    ("timing", "batch_size", 0, {"batch_size": 0}),
    ("timing", "memory_cap_gb", 0, {"memory_cap_gb": 0}),
    ("timing", "memory_cap_gb", "1e3", {"memory_cap_gb": "1e3"}),
    ("timing", "device", "tpu", {"device": "tpu"}),
    ("timing", "model", "my.py:build", {"model": "my.py:build"}),
    ("timing", "noise", {**NOISE, "min_processes": 0}, {"noise": {"min_processes": 0}}),
    ("timing", "noise", {**NOISE, "max_processes": 0}, {"noise": {"max_processes": 0}}),
    ("nsys", "precision", "fp16", {"nsys": {"precision": "fp16"}}),
    ("nsys", "profiled_steps", 0, {"nsys": {"profiled_steps": 0}}),
    ("nsys_backend", "backend", "perf", {"nsys": {"backend": "perf"}}),
    ("memory", "pass_name", "forward_backward", {"memory": {"passes": ["forward_backward"]}}),
    ("memory", "warmup_steps", 0, {"memory": {"warmup_steps": 0}}),
    ("memory", "stacks", "some", {"memory": {"stacks": "some"}}),
    ("attention", "head_dim", -8, {"attention": {"head_dims": [-8]}}),
    ("attention", "implementation", "flash", {"attention": {"implementations": ["flash"]}}),
    ("attention", "steps", 1, {"attention": {"steps": 1}}),
    ("compile", "attention", "flash", {"compile": {"attention": ["flash"]}}),
    ("compile", "context_length", 0, {"compile": {"context_length": 0}}),
    ("ladder", "profile_steps", -1, {"ladder": {"profile_steps": -1}}),
    ("ladder", "matmul", {"sizes": [0], "warmup_s": 0.0, "bursts": 1, "burst_products": 1},
     {"ladder": {"matmul": {"n": [0]}}}),
    ("norms", "context_length", 0, {"timing": {"context_lengths": [0]}}),
]


@pytest.mark.parametrize(("job", "key", "value", "override"), SAME_RULES,
                         ids=[f"{job}-{key}-{value!r}"[:60] for job, key, value, _ in SAME_RULES])
def test_what_the_config_refuses_the_spec_refuses_in_one_sentence(job, key, value, override):
    base = yaml.safe_load((REPO / "config.yaml").read_text())
    with pytest.raises(ConfigError):
        load({**base, "preset": "smoke"}, SCHEMA, overrides=[override])
    with pytest.raises(UserError) as refused:
        job_spec.check_spec(job, {**spec_fields(job), key: value})
    said = str(refused.value)
    assert said.startswith(f"the spec's {key}") and "\n" not in said, said
    assert said.endswith("fix it."), said


# Checks the config makes beyond its schema, made of a spec too.
@pytest.mark.parametrize(("job", "settings", "said"), [
    ("timing", {"num_heads": 3}, "the spec: d_model 64 is not divisible by num_heads 3: choose a num_heads"),
    ("compile", {"noise": {**NOISE, "min_processes": 3}},
     "the spec's noise.max_processes (2) is below noise.min_processes (3)"),
    ("ladder", {"rung": "bf16-turbo"}, "the spec's rung names 'bf16-turbo', which is not a rung"),
    ("timing", {"memory_cap_gb": float("nan")}, "the spec: memory_cap_gb: nan is not a number any setting"),
    ("timing", {"batchsize": 3}, "the spec of job timing has no key batchsize; did you mean batch_size?"),
])
def test_the_configs_own_checks_and_a_typo_are_said_of_a_spec(job, settings, said):
    with pytest.raises(UserError, match="^" + re.escape(said)):
        job_spec.check_spec(job, {**spec_fields(job), **settings})


def test_the_config_refuses_nan_and_says_how_yaml_writes_1e308():
    with pytest.raises(ConfigError, match=r"memory_cap_gb: nan is not a number any setting takes"):
        config_of("smoke", lambda c: c.update(memory_cap_gb=yaml.safe_load(".nan")))
    with pytest.raises(ConfigError, match=r"YAML reads 1e308 as text: write 1\.0e\+308"):
        config_of("smoke", lambda c: c.update(memory_cap_gb=yaml.safe_load("1e308")))


def measure(job: str, spec, *paths) -> str:
    """What `lmstudy measure` says of `spec`: its UserError's sentence (a spec it takes fails the test)."""
    with pytest.raises(UserError) as refused:
        text = spec if isinstance(spec, str) else json.dumps(spec)
        main(["measure", job, "--spec", text, *map(str, paths)])
    return str(refused.value)


@pytest.mark.parametrize(("spec", "said"), [
    ('{"size": "tiny", "size": "small"}', "--spec: the key 'size' is written twice"),
    ('{"timed_steps": NaN}', "--spec: NaN is not a value any setting takes"),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "--spec: nests far deeper"),
    ('{"a": ' * 60 + "1" + "}" * 60, "--spec: nests far deeper"),
    ("timed_steps -3", "the spec's timed_steps: -3 is less than the minimum of 2"),
    ("context_length 0", "the spec's context_length: 0 is less than the minimum of 1"),
    ("model plain", "the spec's model: 'my.py:build' is not of type 'object'"),
    ("warmup scalar", "the spec's warmup_steps: 1 is not of type 'array'"),
])
def test_a_wrong_spec_stops_lmstudy_measure_before_it_measures(spec, said, tmp_path):
    cases = {"timed_steps -3": {"timed_steps": -3}, "context_length 0": {"context_length": 0},
             "model plain": {"model": "my.py:build"}, "warmup scalar": {"warmup_steps": 1}}
    if spec in cases:
        spec = {**spec_fields("timing"), **cases[spec]}
    assert measure("timing", spec, "--out", tmp_path / "t.csv").startswith(said)
    assert not (tmp_path / "t.csv").exists()


def test_an_out_that_is_a_folder_is_refused_before_measuring(tmp_path):
    spec = spec_fields("norms")
    said = measure("norms", spec, "--out", tmp_path)
    assert said.startswith(f"--out: {tmp_path} is a folder"), said


def spec_command(*args) -> str:
    with pytest.raises(UserError) as refused:
        main(["spec", *args, "--configfile", str(REPO / "config.yaml"), "--preset", "smoke"])
    return str(refused.value)


TINY = ["size=tiny", "context_length=32", "precision=fp32", "variant=naive"]


@pytest.mark.parametrize(("args", "said"), [
    (["timing", "batch_size=2"],
     "the spec must name size, context_length, precision, variant (the job's configuration)"),
    (["timing", *TINY, "batchsize=3"], "the spec of job timing has no key batchsize; did you mean"),
    (["timing", "size=huge", *TINY[1:]], "no size huge in "),
    (["nosuch"], "no measuring job named 'nosuch': the jobs are timing"),
    (["timing", "size=[tiny"], "'size=[tiny': its value is not YAML"),
    (["timing", *TINY[:1], "context_length=-5", *TINY[2:]], "the spec's context_length: -5 is less than"),
    (["timing", *TINY[:2], "precision=fp8", *TINY[3:]], "the spec's precision: 'fp8' is not one of"),
    (["timing", *TINY, "memory_cap_gb=1e308"], "the spec's memory_cap_gb: '1e308' is not of type"),
    (["timing", *TINY, "timed_steps=2", "timed_steps=3"], "timed_steps is set twice"),
])
def test_lmstudy_spec_refuses_what_the_config_refuses(args, said):
    sentence = spec_command(*args)
    assert sentence.startswith(said) and "\n" not in sentence, sentence
    if "size=huge" in args:
        assert "the sizes are " in sentence and "tiny" in sentence, sentence


def test_every_job_is_checked():
    assert set(SMOKE_JOBS) == set(registry.jobs())


def test_each_job_reads_apart_in_lmstudy_measure_help():
    from lmstudy.command import _summary

    jobs = registry.jobs()
    lines = {name: _summary(job.section, job.load_runner().__doc__ or "") for name, job in jobs.items()}
    assert len(set(lines.values())) == len(lines), lines
    assert lines["nsys_backend"] == "nsys: which profiler this machine uses"
    assert lines["norms"].startswith("precision: the error of RMSNorm and LayerNorm")


def test_lmstudy_spec_completes_a_model_given_in_part_and_checks_it_whole(capsys):
    """A model given by some of config model:'s keys (its factory and name, as a user writes it) gets
    the rest from the config file; a bad value among them is still refused (the GPU check's Llama
    job was refused 'range_depth is a required property' before it was completed)."""
    given = json.dumps({"model": {"factory": "tests/fixtures/models/encoder_lm.py:build", "name": "mine"}})
    main(["spec", "timing", *TINY, "--spec", given, "--configfile", str(REPO / "config.yaml"),
          "--preset", "smoke"])
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["name"] == "mine" and model["range_depth"] >= 0 and "extra" in model
    bad = json.dumps({"model": {"factory": "tests/fixtures/models/encoder_lm.py:build", "range_depth": -2}})
    assert "range_depth: -2 is less than the minimum of 0" in spec_command("timing", *TINY, "--spec", bad)
