"""A new section takes the five places docs/layout.md names, and nothing else.

tests/fixtures/new_section/ holds the worked example (a checkpoint section: its package and its
rule file); this test adds it to a copy of the repository with its name in NAMES, its config
block and its schema, and runs the smoke preset: the section is measured through `lmstudy
measure checkpoint`, aggregated, counted by the cost section, numbered by its place and reported,
while git sees no other file changed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pandas as pd
import pytest

from lmstudy.registry import NAMES

from .conftest import FIXTURES, REPO, new_workdir, snakemake

EXAMPLE = FIXTURES / "new_section"
CONFIG_BLOCK = "\ncheckpoint:\n  enabled: true\n  repeats: 3\n"
SCHEMA_BLOCK = """  checkpoint:
    type: object
    additionalProperties: false
    required: [enabled, repeats]
    properties:
      enabled: {type: boolean}
      repeats: {$ref: "#/$defs/positive_int"}
"""
# The other sections off: this test is about the new one (the cost section always runs).
OTHERS_OFF = [f"{name}={{enabled: false}}" for name in
              ("timing", "nsys", "precision", "memory", "attention", "compile", "ladder", "comm", "ddp",
               "sharding")]


def _repository_with_the_section(repo):
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file() and not name.startswith("tests/"):
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, repo / name)
    commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]
    for git in (["init", "-q"], ["add", "-A"], commit):
        subprocess.run(["git", *git], cwd=repo, check=True, capture_output=True)
    # 1. the package and 3. the rule file, as the worked example has them
    shutil.copytree(EXAMPLE / "lmstudy", repo / "lmstudy", dirs_exist_ok=True)
    shutil.copytree(EXAMPLE / "workflow", repo / "workflow", dirs_exist_ok=True)
    # 2. its name in the registry, before the cost section
    names = repo / "lmstudy/registry.py"
    text = names.read_text()
    assert text.count('"cost"') == 1, "registry.py names the cost section once, in NAMES"
    names.write_text(text.replace('"cost"', '"checkpoint", "cost"', 1))
    # 4. its config block and its schema
    with (repo / "config.yaml").open("a") as config:
        config.write(CONFIG_BLOCK)
    schema = repo / "workflow/schemas/config.schema.yaml"
    text = schema.read_text()
    assert "\n  attention:\n" in text
    schema.write_text(text.replace("\n  attention:\n", "\n" + SCHEMA_BLOCK + "  attention:\n", 1))


@pytest.mark.workflow
def test_a_new_section_in_five_places_is_measured_reported_and_costed(tmp_path):
    repo = tmp_path / "repo"
    _repository_with_the_section(repo)
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                             capture_output=True, text=True, check=True).stdout.split("\n")
    touched = sorted({line[3:].split("/checkpoint/")[0] for line in changed if line})
    assert touched == ["config.yaml", "lmstudy/registry.py", "lmstudy/sections",
                       "workflow/rules/checkpoint.smk", "workflow/schemas/config.schema.yaml"], touched

    # The registry finds its job and its files; its runner answers --help without torch.
    done = subprocess.run([sys.executable, "-m", "lmstudy", "measure", "checkpoint", "--help"], cwd=repo,
                          capture_output=True, text=True, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin"})
    assert done.returncode == 0 and "torch.save" in done.stdout, done.stderr

    workdir = new_workdir(tmp_path / "run")
    shutil.copy(repo / "config.yaml", workdir / "config.yaml")
    snakemake(workdir, "-s", str(repo / "Snakefile"), "--cores", "2", "--config", "preset=smoke", *OTHERS_OFF)
    results = workdir / "results/default"
    rows = pd.read_csv(results / "checkpoint/checkpoint.csv")
    assert len(rows) == 3 and (rows["save_s"] > 0).all() and (rows["load_s"] > 0).all()
    cost = pd.read_csv(results / "cost/jobs.csv")
    assert set(cost.loc[cost["section"] == "checkpoint", "rule"]) == {"save_load_checkpoint",
                                                                    "aggregate_checkpoint", "figures"}
    report = (workdir / "report/default/report.md").read_text()
    number = len(NAMES)  # before cost, the last: the number cost had
    assert f"## {number}\\. Checkpoints" in report and f"## {number + 1}\\. " in report, report[:3000]
    assert "loads slowest, in" in report and "Save and load time per size" in report
    assert (workdir / "report/default/tables/finding_checkpoint_slowest_load.csv").exists()
