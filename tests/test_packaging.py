"""What a user relies on when installing: a license, and the Snakemake versions the workflow works with."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import metadata, requires, version

import pytest
from packaging.requirements import Requirement

from .conftest import REPO


def snakemake_requirement() -> Requirement:
    # As installed from pyproject.toml (make install-test installs this project editable).
    return next(Requirement(r) for r in requires("lmstudy") if Requirement(r).name == "snakemake")


def test_the_snakemake_range_is_bounded_and_holds_the_installed_snakemake():
    wanted = snakemake_requirement()
    bounds = {spec.operator for spec in wanted.specifier}
    # An upper bound: the workflow imports Snakemake internals that a major release may move.
    assert ">=" in bounds and "<" in bounds, wanted
    assert wanted.specifier.contains(version("snakemake")), (version("snakemake"), str(wanted))


def test_the_snakemake_internals_the_workflow_imports_are_there():
    smk = (REPO / "workflow/rules/common.smk").read_text()
    imports = re.findall(r"^from (snakemake\S*) import (.+)$", smk, flags=re.M)
    assert imports
    code = "\n".join(f"from {module} import {names}" for module, names in imports)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_license_is_a_file_and_declared():
    declared = metadata("lmstudy")["License-Expression"]
    assert (REPO / "LICENSE").read_text().startswith(f"{declared} License")
    assert "LICENSE" in metadata("lmstudy").get_all("License-File")


def test_the_readme_says_which_pytorch_versions_were_measured():
    readme = (REPO / "README.md").read_text()
    assert re.search(r"PyTorch versions? measured", readme, flags=re.I), "README: which PyTorch was measured?"


def test_every_link_of_the_readme_and_docs_leads_to_a_file():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
    readme = (REPO / "README.md").read_text()
    assert all(f"docs/{p.name}" in readme for p in pages[1:]), "a docs page the README does not link"
    assert "<!--" not in readme  # no leftover markers


def test_the_editable_install_builds_without_a_setuptools_warning(tmp_path):
    # What `make` runs on every install (pip install -e .), through setuptools' own PEP 660 hook.
    code = "import sys; from setuptools import build_meta as b; b.build_editable(sys.argv[1])"
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONWARNINGS": "default"})
    if "No module named 'setuptools'" in done.stderr:
        pytest.skip("no setuptools in this environment (pip builds in an isolated one)")
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert "Warning" not in said and "Please be careful" not in said, said[-3000:]
    assert list(tmp_path.glob("lmstudy-*.whl"))
