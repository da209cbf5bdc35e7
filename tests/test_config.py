import copy
import json
import shlex
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
    (lambda c: c["ladder"].update(rungs=["fp32", "bf17"]), "ladder.rungs names 'bf17', which is not a rung"),
    (lambda c: c["ladder"]["matmul"].update(n=0), "ladder.matmul.n"),
])
def test_a_wrong_key_or_value_is_named(edit, named):
    config = copy.deepcopy(study_config())
    edit(config)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("(", r"\(")) as error:
        load(config, SCHEMA)
    assert str(error.value).startswith("config: ")
    assert "\n" not in str(error.value)


@pytest.mark.workflow
def test_snakemake_stops_before_any_job_on_a_bad_config(tmp_path: Path):
    workdir = new_workdir(tmp_path)
    text = (workdir / "config.yaml").read_text().replace("timed_steps: 10", "timed_stesp: 10")
    (workdir / "config.yaml").write_text(text)
    done = snakemake(workdir, "-n", check=False)
    assert done.returncode != 0
    assert "timed_stesp" in done.stderr + done.stdout
    assert "Job stats" not in done.stdout


# Issue 13, item 2: config.yaml < preset < --configfile < --config, through Snakemake itself.
def time_model_commands(workdir: Path, *args: str) -> list[str]:
    """The shell commands of the time_model jobs a dry-run prints."""
    out = snakemake(workdir, "-n", "-p", *args).stdout
    commands = [line for line in out.splitlines() if "lmstudy_gpu measure timing" in line]
    assert commands, out[-3000:]
    return commands


def spec_values(commands: list[str], key: str) -> set:
    """The values of `key` in the jobs' specs (lmstudy.job_spec: --spec JSON)."""
    specs = [shlex.split(command.split(" --spec ", 1)[1])[0] for command in commands]
    return {json.loads(spec)[key] for spec in specs}


@pytest.mark.workflow
def test_the_preset_overrides_config_yaml(tmp_path: Path):
    commands = time_model_commands(new_workdir(tmp_path), "--config", "preset=smoke")
    assert spec_values(commands, "batch_size") == {2}  # smoke's, not config.yaml's 4


@pytest.mark.workflow
def test_config_on_the_command_line_overrides_the_preset(tmp_path: Path):
    commands = time_model_commands(new_workdir(tmp_path), "--config", "preset=smoke", "batch_size=8")
    assert spec_values(commands, "batch_size") == {8}


def write_configfile(tmp_path: Path, values: dict) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


@pytest.mark.workflow
def test_a_configfile_overrides_the_preset_and_config_overrides_the_configfile(tmp_path: Path):
    workdir = new_workdir(tmp_path / "w")
    mine = write_configfile(tmp_path, {"batch_size": 6, "timing": {"timed_steps": 7}})
    commands = time_model_commands(workdir, "--configfile", str(mine), "--config", "preset=smoke")
    assert spec_values(commands, "batch_size") == {6}
    assert spec_values(commands, "timed_steps") == {7}
    commands = time_model_commands(
        workdir, "--configfile", str(mine), "--config", "preset=smoke", "batch_size=8"
    )
    assert spec_values(commands, "batch_size") == {8}
    assert spec_values(commands, "timed_steps") == {7}  # untouched by --config
    assert spec_values(commands, "size") == {"tiny", "oversized"}  # the rest still smoke's


@pytest.mark.workflow
def test_a_bad_value_in_a_configfile_is_not_hidden_by_the_preset(tmp_path: Path):
    workdir = new_workdir(tmp_path / "w")
    mine = write_configfile(tmp_path, {"timing": {"timed_steps": 1}})
    done = snakemake(workdir, "-n", "--configfile", str(mine), "--config", "preset=smoke", check=False)
    assert done.returncode != 0
    assert "timing.timed_steps: 1 is less than the minimum of 2" in done.stderr + done.stdout


# Item 3: nested values from the command line are read as YAML.
@pytest.mark.workflow
def test_nested_config_values_on_the_command_line_are_typed(tmp_path: Path):
    commands = time_model_commands(
        new_workdir(tmp_path), "--config", "preset=smoke", "timing={timed_steps: 5, context_lengths: [48]}"
    )
    assert spec_values(commands, "timed_steps") == {5}
    assert spec_values(commands, "context_length") == {48}


@pytest.mark.workflow
def test_true_on_the_command_line_is_the_boolean_config_yaml_spells(tmp_path: Path):
    for spelled in ("tf32=true", "tf32=True"):
        commands = time_model_commands(new_workdir(tmp_path / spelled), "--config", "preset=smoke", spelled)
        assert commands and spec_values(commands, "tf32") == {True}


# Item 6: empty lists are refused at start, naming the key.
@pytest.mark.parametrize("key", [
    ("timing", "sizes"), ("timing", "context_lengths"), ("nsys", "sizes"), ("compile", "sizes"),
    ("ladder", "sizes"), ("ladder", "rungs"),
])
def test_an_empty_list_is_refused_naming_the_key(key):
    config = study_config()
    config[key[0]][key[1]] = []
    with pytest.raises(ConfigError, match=rf"config: {key[0]}\.{key[1]}: \[\] should be non-empty"):
        load(config, SCHEMA)


@pytest.mark.workflow
def test_snakemake_refuses_an_unknown_rung_naming_the_known_ones(tmp_path: Path):
    from lmstudy.ladder_rungs import RUNGS

    workdir = new_workdir(tmp_path)
    done = snakemake(workdir, "-n", "--config", "preset=smoke", "ladder={rungs: [fp32, bf16-turbo]}",
                     check=False)
    assert done.returncode != 0
    said = done.stderr + done.stdout
    assert f"config: ladder.rungs names 'bf16-turbo', which is not a rung of the ladder (the rungs: " \
           f"{', '.join(RUNGS)})." in said
    assert "Job stats" not in done.stdout


@pytest.mark.workflow
def test_snakemake_refuses_an_empty_list_before_any_job(tmp_path: Path):
    workdir = new_workdir(tmp_path)
    done = snakemake(workdir, "-n", "--config", "preset=smoke", "compile={sizes: []}", check=False)
    assert done.returncode != 0
    assert "compile.sizes: [] should be non-empty" in done.stderr + done.stdout
    assert "Job stats" not in done.stdout


# Item 7: a run name cannot leave results/.
@pytest.mark.parametrize("run", ["..", ".", ".hidden"])
def test_a_run_name_with_a_leading_dot_is_refused(run):
    config = study_config()
    config["run"] = run
    with pytest.raises(ConfigError, match=r"config: run: .* outside results/"):
        load(config, SCHEMA)


@pytest.mark.workflow
def test_snakemake_refuses_run_dot_dot_and_writes_nothing(tmp_path: Path):
    workdir = new_workdir(tmp_path / "w")
    done = snakemake(workdir, "--cores", "1", "--config", "preset=smoke", "run=..", check=False)
    assert done.returncode != 0
    assert "outside results/" in done.stderr + done.stdout
    assert not (tmp_path / "logs").exists() and not (workdir / "results").exists()


@pytest.mark.workflow
def test_a_configfile_standing_in_for_config_yaml_is_the_base_under_the_preset(tmp_path: Path):
    # With no config.yaml in the working directory, the first --configfile is the study's config.
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    study = str(REPO / "config.yaml")
    commands = time_model_commands(workdir, "--configfile", study, "--config", "preset=smoke")
    assert spec_values(commands, "batch_size") == {2}
    mine = write_configfile(tmp_path, {"batch_size": 6})
    commands = time_model_commands(workdir, "--configfile", study, str(mine), "--config", "preset=smoke")
    assert spec_values(commands, "batch_size") == {6}


# Issue 23, items 3, 9, 12, 14, 16 and 18: configs that expand, presets that chain, names too long.
YAML_BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)]
    + ["run: *i", ""]
)


def test_a_few_hundred_bytes_of_yaml_aliases_are_refused_in_one_sentence_at_once(tmp_path: Path):
    assert len(YAML_BOMB) < 500
    bomb = yaml.safe_load(YAML_BOMB)  # shared references: small in memory, a billion values walked
    config = {**study_config(), **bomb}
    with pytest.raises(ConfigError, match="more than 100000 values") as error:
        load(config, SCHEMA)
    assert len(str(error.value)) < 400 and "\n" not in str(error.value)


@pytest.mark.workflow
def test_snakemake_refuses_a_configfile_of_yaml_aliases_in_one_sentence(tmp_path: Path):
    workdir = new_workdir(tmp_path / "w")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(YAML_BOMB)
    done = snakemake(workdir, "-n", "--configfile", str(bomb), check=False)
    assert done.returncode != 0
    out = done.stderr + done.stdout
    assert "more than 100000 values" in out and "MemoryError" not in out and len(out) < 20000


@pytest.mark.parametrize(("presets", "named"), [
    (["smoke"], "presets: must map each preset's name to its overrides, not be a list"),
    ({"smoke": ["device"]}, "presets.smoke: must be a mapping of overrides, not a list"),
    ({"smoke": {"preset": "smoke"}}, "presets.smoke: sets preset: 'smoke', but presets do not chain"),
    ({"smoke": {"preset": "nowhere"}}, "presets.smoke: sets preset: 'nowhere', but presets do not chain"),
])
def test_malformed_or_chained_presets_are_named(presets, named):
    config = study_config()
    config["presets"] = presets
    config["preset"] = "smoke"
    with pytest.raises(ConfigError) as error:
        load(config, SCHEMA)
    assert named in str(error.value)


@pytest.mark.parametrize(("edit", "named"), [
    (lambda c: c.update(run="r" * 256), "run: 'rrrr"),
    (lambda c: c.update(run="a_vs_b"), "contains '_vs_'"),
    (lambda c: c["timing"].update(timed_steps=10**6), "timed_steps: 1000000 is greater than the maximum"),
    (lambda c: c["timing"].update(warmup_steps=[0, 1_000_000]), "timing.warmup_steps.1"),
    (lambda c: c["ladder"]["matmul"].update(bursts=10**9), "ladder.matmul.bursts"),
])
def test_run_names_and_step_counts_beyond_what_works_are_named(edit, named):
    config = copy.deepcopy(study_config())
    edit(config)
    with pytest.raises(ConfigError) as error:
        load(config, SCHEMA)
    assert named in str(error.value) and len(str(error.value)) < 400


# Issue 32, item 4: a key written twice in a YAML config is refused, not silently the last one.
@pytest.mark.workflow
def test_snakemake_refuses_a_key_written_twice_naming_it_and_both_lines(tmp_path: Path):
    workdir = new_workdir(tmp_path / "w")
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "sizes:\n"
        "  tiny: {d_model: 64, d_ff: 256, num_layers: 2, num_heads: 2}\n"
        "  other: {d_model: 64, d_ff: 256, num_layers: 2, num_heads: 2}\n"
        "  tiny: {d_model: 32, d_ff: 128, num_layers: 1, num_heads: 2}\n"
    )
    done = snakemake(workdir, "-n", "--configfile", str(mine), "--config", "preset=smoke", check=False)
    assert done.returncode != 0
    out = done.stderr + done.stdout
    assert f"{mine}: the key 'tiny' is written twice under 'sizes' (lines 2 and 4)" in out
    assert "Job stats" not in out


def test_keys_repeated_only_through_an_alias_or_in_different_mappings_are_fine(tmp_path: Path):
    from lmstudy.config import check_unique_keys

    fine = tmp_path / "fine.yaml"
    fine.write_text("a: &x {tiny: 1}\nb: *x\nc: {tiny: 2, <<: *x}\n")
    check_unique_keys(fine)
    check_unique_keys(REPO / "config.yaml")


# Issue 32, item 10: a run name the report's command line would take for an option, or one too long.
def test_a_run_name_starting_with_a_dash_is_refused_at_the_config_check():
    config = study_config()
    config["run"] = "-x"
    with pytest.raises(ConfigError, match=r"^config: run: '-x' starts with '-', which a command line takes"):
        load(config, SCHEMA)


def test_a_very_long_run_name_is_refused_with_its_reason_not_cut_before_it():
    config = study_config()
    config["run"] = "r" * 300
    with pytest.raises(ConfigError) as error:
        load(config, SCHEMA)
    message = str(error.value)
    assert message.endswith("(300 characters) is too long (at most 100).") and len(message) < 200, message


# Issue 32, item 15: `snakemake --report` as Snakemake's docs write it, where that config's run is not here.
@pytest.mark.workflow
def test_a_report_of_a_run_that_did_not_run_here_names_the_config_to_pass(tmp_path: Path):
    workdir = new_workdir(tmp_path / "w")
    (workdir / "results/mine").mkdir(parents=True)
    done = snakemake(workdir, "--report", "report.html", check=False)
    out = done.stderr + done.stdout
    assert done.returncode != 0 and not (workdir / "report.html").exists()
    assert "snakemake --report: " in out and "jobs of run 'default' with this config have not run here" in out
    assert "the same --config as the run it reports (--config preset=<its preset> run=mine)" in out
    assert out.count("Warning") == 0, out[-2000:]
