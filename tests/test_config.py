import copy
from pathlib import Path

import pytest
import yaml

from lmstudy.config import ConfigError, apply_preset, load

from .conftest import REPO, new_workdir, snakemake

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def study_config() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


@pytest.mark.parametrize("preset", ["full", "quick", "smoke"])
def test_every_preset_validates(preset):
    config = study_config()
    config["preset"] = preset
    merged = load(config, SCHEMA)
    assert merged["preset"] == preset
    assert set(merged["timing"]["sizes"]) <= set(merged["sizes"])


def test_preset_merges_nested_values_and_keeps_the_rest():
    config = study_config()
    config["preset"] = "smoke"
    merged = apply_preset(config)
    assert merged["device"] == "cpu"
    assert merged["timing"]["passes"] == config["timing"]["passes"]  # untouched by smoke
    assert merged["sizes"]["small"] == config["sizes"]["small"]
    assert "tiny" in merged["sizes"]


@pytest.mark.parametrize(("edit", "named"), [
    (lambda c: c["timing"].update(contxt_lengths=[1]), "contxt_lengths"),
    (lambda c: c["timing"].update(precisions=["fp8"]), "timing.precisions.0"),
    (lambda c: c["timing"].update(sizes=["small", "huge"]), "'huge'"),
    (lambda c: c["sizes"]["small"].update(num_heads=7), "sizes.small"),
    (lambda c: c.update(batch_size=0), "batch_size"),
    (lambda c: c.update(preset="fast"), "preset 'fast'"),
])
def test_a_wrong_key_or_value_is_named(edit, named):
    config = copy.deepcopy(study_config())
    edit(config)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("(", r"\(")) as error:
        load(config, SCHEMA)
    assert str(error.value).startswith("config: ")
    assert "\n" not in str(error.value)


def test_snakemake_stops_before_any_job_on_a_bad_config(tmp_path: Path):
    workdir = new_workdir(tmp_path)
    text = (workdir / "config.yaml").read_text().replace("timed_steps: 10", "timed_stesp: 10")
    (workdir / "config.yaml").write_text(text)
    done = snakemake(workdir, "-n", check=False)
    assert done.returncode != 0
    assert "timed_stesp" in done.stderr + done.stdout
    assert "Job stats" not in done.stdout
