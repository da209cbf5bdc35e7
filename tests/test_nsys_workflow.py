"""Section 2 through Snakemake: the smoke preset end to end, and the nsys check at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.sections import nsys as section

REPO = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]


def smoke_settings() -> dict:
    import yaml

    from lmstudy.config import apply_preset

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    return apply_preset({**config, "preset": "smoke"})["nsys"]


def snakemake(workdir: Path, *args: str, override: str = "") -> subprocess.CompletedProcess:
    configs = [str(REPO / "config.yaml")]
    if override:
        (workdir / "override.yaml").write_text(override)
        configs.append(str(workdir / "override.yaml"))
    return subprocess.run(
        [*SNAKEMAKE, *args, "--directory", str(workdir), "--configfile", *configs],
        capture_output=True,
        text=True,
        cwd=workdir,
    )


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("smoke")
    done = snakemake(
        workdir,
        "results/default/nsys/kernels.csv",
        "results/default/figures/nsys",
        "--cores",
        "2",
        override="preset: smoke\n",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir / "results" / "default"


def test_smoke_profiles_every_configuration(smoke):
    runs = pd.read_csv(smoke / "nsys" / "runs.csv")
    settings = smoke_settings()
    assert len(runs) == len(settings["sizes"]) * len(settings["context_lengths"]) * len(settings["passes"])
    assert "oversized" in settings["sizes"]
    assert set(runs["backend"]) == {"torch"}
    assert set(runs[runs["size"] == "oversized"]["status"]) == {"OOM"}
    assert set(runs[runs["size"] != "oversized"]["status"]) == {"ok"}
    kernels = pd.read_csv(smoke / "nsys" / "kernels.csv")
    assert set(kernels["size"]) == set(settings["sizes"]) - {"oversized"}
    for path in runs[runs["status"] == "ok"]["files"]:
        assert Path(smoke.parent.parent / path).exists()


def test_smoke_section_has_its_tables_figure_and_findings(smoke):
    figures = smoke / "figures" / "nsys"
    assert (figures / section.SHARES_FIGURE).stat().st_size > 0
    built = section.build(smoke, figures)
    captions = [getattr(b, "caption", "") for b in built.blocks]
    for label in ("(a)", "(b)", "(d)", "(e)"):
        assert any(c.startswith(label) for c in captions), label
    findings = next(b for b in built.blocks if hasattr(b, "items")).items
    assert any("ran out of memory (oversized" in f for f in findings)
    assert any("GEMMs take" in f for f in findings)
    table_a = next(b for b in built.blocks if getattr(b, "caption", "").startswith("(a)")).frame
    assert set(table_a[table_a["size"] == "oversized"]["nsys step ms"]) == {"OOM"}


def test_missing_nsys_stops_the_workflow_at_start(tmp_path):
    done = snakemake(tmp_path, "-n", override="preset: quick\nnsys: {executable: /no/such/nsys}\n")
    assert done.returncode != 0
    assert "nsys.executable" in done.stdout + done.stderr


def test_switched_off_section_needs_no_nsys(tmp_path):
    done = snakemake(
        tmp_path,
        "-n",
        override="preset: quick\nnsys: {enabled: false, executable: /no/such/nsys}\n",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "profile_model" not in done.stdout
