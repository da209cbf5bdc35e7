"""Section 2 through Snakemake: the smoke preset end to end, and the nsys check at start."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.report.answers import Answers
from lmstudy.report.render import Findings
from lmstudy.sections.nsys import section

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


@pytest.mark.workflow  # the smoke fixture runs the section's jobs
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


@pytest.mark.workflow  # the smoke fixture runs the section's jobs
def test_smoke_section_has_its_tables_figure_and_findings(smoke):
    figures = smoke / "figures" / "nsys"
    assert (figures / section.SHARES_FIGURE).stat().st_size > 0
    built = section.build(smoke, figures)
    captions = [getattr(b, "caption", "") for b in built.blocks]
    for label in ("(a)", "(b)", "(d)", "(e)"):
        assert any(c.startswith(label) for c in captions), label
    findings = next(b for b in built.blocks if isinstance(b, Findings)).items
    assert any("ran out of memory (oversized" in f for f in findings)
    # The course's five questions answered first, each from its table.
    answers = next(b for b in built.blocks if isinstance(b, Answers)).items
    assert [a.question.split(":")[0] for a in answers] == [f"nsys_profile ({k})" for k in "abcde"]
    assert all(a.source.startswith("nsys_") for a in answers)
    assert "The profiles are kept" in " ".join(getattr(b, "text", "") for b in built.blocks)
    assert any("GEMMs take" in f for f in findings)
    table_a = next(b for b in built.blocks if getattr(b, "caption", "").startswith("(a)")).frame
    assert set(table_a[table_a["size"] == "oversized"]["profiler step ms"]) == {"OOM"}  # torch.profiler ran
    assert built.title == "2. Operator profiles on the CPU (torch.profiler)"


@pytest.mark.workflow
def test_a_dry_run_needs_no_nsys(tmp_path):
    """A login node or a laptop without Nsight Systems plans the study, nsys.backend auto or nsys."""
    assert shutil.which("nsys") is None, "this test needs a machine without nsys"
    for override in ("", "nsys: {backend: nsys, executable: /no/such/nsys}\n"):
        done = snakemake(tmp_path, "-n", override=override)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "nsys_backend" in done.stdout and "profile_model" in done.stdout


@pytest.mark.workflow
def test_missing_nsys_stops_at_the_check_before_any_profile_job(tmp_path):
    done = snakemake(
        tmp_path,
        "results/default/nsys/kernels.csv",
        "--cores",
        "1",
        override="preset: smoke\nnsys: {backend: nsys, executable: /no/such/nsys}\n",
    )
    assert done.returncode != 0
    log = (tmp_path / "logs/default/nsys/backend.log").read_text()
    assert "set `nsys.executable` in config.yaml" in log
    assert "nsys.executable" in done.stderr
    assert not (tmp_path / "results/default/nsys/raw").exists()
    assert not (tmp_path / "results/default/nsys/backend.json").exists()


@pytest.mark.workflow  # the smoke fixture runs the section's jobs
def test_auto_backend_without_nsys_profiles_with_torch_and_says_how_to_get_nsys(tmp_path, smoke):
    done = snakemake(
        tmp_path,
        "results/default/nsys/backend.json",
        "--cores",
        "1",
        override="preset: quick\nnsys: {backend: auto, executable: /no/such/nsys}\n",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads((tmp_path / "results/default/nsys/backend.json").read_text())
    assert answer["requested"] == "auto" and answer["backend"] == "torch"
    assert "install it" in answer["note"] and "nsys.executable" in answer["note"]
    log = (tmp_path / "logs/default/nsys/backend.log").read_text()
    assert log.startswith("profiling backend: torch (torch.profiler); requested: auto.")
    # section 2 of a report from those profiles says so
    results = tmp_path / "copy"
    shutil.copytree(smoke, results)
    shutil.copy(tmp_path / "results/default/nsys/backend.json", results / "nsys/backend.json")
    texts = [b.text for b in section.build(results, results / "figures/nsys").blocks if hasattr(b, "text")]
    assert texts[0].startswith("Backend: torch.")
    assert answer["note"] in texts


@pytest.mark.workflow  # the smoke fixture runs the section's jobs
def test_the_profile_jobs_log_which_backend_ran(smoke):
    logs = sorted((smoke.parent.parent / "logs/default/nsys").glob("tiny_*.log"))
    assert logs
    for log in logs:
        assert log.read_text().startswith("profiling backend: torch (torch.profiler); requested: auto."), log


@pytest.mark.workflow
def test_switched_off_section_needs_no_nsys(tmp_path):
    done = snakemake(
        tmp_path,
        "-n",
        override="preset: quick\nnsys: {enabled: false, executable: /no/such/nsys}\n",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "profile_model" not in done.stdout
