"""The conftest's check that every test starting Snakemake carries the `workflow` mark finds one that
does, however it reaches Snakemake: directly, through a helper of its module, or through a fixture."""

from __future__ import annotations

from .conftest import _starting_functions

SOURCE = '''
import pytest
from .conftest import SNAKEMAKE, snakemake

def dry_run(workdir):
    return snakemake(workdir, "-n")

def planned(workdir):
    return dry_run(workdir).stdout

@pytest.fixture
def finished(tmp_path):
    return subprocess.run([*SNAKEMAKE, "--cores", "1"])

def test_direct(tmp_path):
    snakemake(tmp_path, "--cores", "1")

def test_through_two_helpers(tmp_path):
    assert planned(tmp_path)

def test_reads_a_table():
    assert True
'''


def test_the_check_follows_helpers_and_fixtures(tmp_path):
    module = tmp_path / "test_example.py"
    module.write_text(SOURCE)
    starting = _starting_functions(str(module))
    assert {"dry_run", "planned", "finished", "test_direct", "test_through_two_helpers"} <= starting
    assert "test_reads_a_table" not in starting
