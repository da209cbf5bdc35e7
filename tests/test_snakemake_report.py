"""Snakemake's own report (`snakemake --report`) after the smoke run."""

from __future__ import annotations

import shlex
import shutil
import zipfile

import pytest

from .conftest import REPO, snakemake


@pytest.fixture
def finished(smoke_run, tmp_path):
    return shutil.copytree(smoke_run, tmp_path / "run", symlinks=True)


def test_html_report_holds_the_tables_figures_and_captions(finished):
    snakemake(finished, "--report", "report/snakemake.html", "--config", "preset=smoke")
    html = (finished / "report/snakemake.html").read_text()
    # the captions (workflow/report/*.rst), rendered with this run's values
    assert "End-to-end timing of the Transformer LM" in html
    assert "over 3 timed steps" in html  # the smoke preset's timing.timed_steps
    assert "Figures of the" in html and "timing" in html
    assert "The study" in html and "report, rendered from this run" in html
    for name in ("timing.csv", "latency.png", "index.html", "report.md"):
        assert name in html, name


def test_zip_report_contains_every_annotated_output(finished):
    snakemake(finished, "--report", "report/snakemake.zip", "--config", "preset=smoke")
    names = zipfile.ZipFile(finished / "report/snakemake.zip").namelist()
    assert any(n.endswith("/report.html") for n in names)
    figures = sorted(p.name for p in (finished / "results/default/figures").rglob("*.png"))
    assert figures
    for expected in ["timing.csv", "index.html", "report.md", *figures]:
        assert any(n.endswith("/" + expected) for n in names), (expected, names)


def test_the_readmes_report_command_works_after_the_smoke_run_without_warnings(finished):
    # The command exactly as the README writes it, after the README's smoke command.
    readme = (REPO / "README.md").read_text().splitlines()
    command = next(line for line in readme if line.startswith("snakemake --report "))
    words = shlex.split(command)
    done = snakemake(finished, *words[1:])
    said = done.stdout + done.stderr
    assert "Missing metadata" not in said and "Warning" not in said, said[-3000:]
    target = finished / words[2]
    assert target.stat().st_size > 100_000 and "The study" in target.read_text()
