"""Profiles and nsys programs from elsewhere (issue 13, items 5, 9 and 10).

The exports are the real H200 fixtures (tests/fixtures/gpu), copied; item 5's
"other program" is one of them with its ranges moved to another NVTX domain,
as a program that annotates with torch.cuda.nvtx (the default domain) or a
domain of its own writes them.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse.nsys import sqlite as nsys_sqlite
from lmstudy.analyse.nsys.events import kernel_table
from lmstudy.measure.nsys.executable import NsysMissing, nsys_version

from .conftest import FIXTURES
from .specs import spec_fields

EXPORT = FIXTURES / "gpu" / "nsys_train_fp32.sqlite"
NVTX_DOMAIN_CREATE = 75


def other_program(tmp_path: Path, domain: str | None) -> Path:
    """The fixture as another program writes it: its ranges in `domain` (None: the default domain)."""
    path = tmp_path / f"other_{domain or 'default'}.sqlite"
    shutil.copy(EXPORT, path)
    with sqlite3.connect(path) as con:
        (lmstudy,) = con.execute(
            "SELECT e.domainId FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE e.eventType = ? AND COALESCE(e.text, s.value) = 'lmstudy'",
            (NVTX_DOMAIN_CREATE,),
        ).fetchone()
        if domain is None:
            con.execute(
                "DELETE FROM NVTX_EVENTS WHERE eventType = ? AND domainId = ?", (NVTX_DOMAIN_CREATE, lmstudy)
            )
            con.execute("UPDATE NVTX_EVENTS SET domainId = 0 WHERE domainId = ?", (lmstudy,))
        else:
            con.execute(
                "UPDATE NVTX_EVENTS SET text = ?, textId = NULL WHERE eventType = ? AND domainId = ?",
                (domain, NVTX_DOMAIN_CREATE, lmstudy),
            )
    return path


def nsys_kernels(tmp_path: Path, export: Path, *args: str) -> tuple[pd.DataFrame, str]:
    out = tmp_path / "kernels.csv"
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy", "nsys_kernels", str(export), "--out", str(out), *args],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    return pd.read_csv(out, keep_default_na=False), done.stderr


def attributed(kernels: pd.DataFrame) -> int:
    """GPU activities that some range encloses."""
    return int(kernels.loc[kernels["range"] != "", "instances"].sum())


@pytest.mark.parametrize("domain", [None, "myapp"], ids=["default domain", "own domain"])
def test_another_programs_ranges_are_read_and_the_fallback_is_said(tmp_path, domain):
    ours, quiet = nsys_kernels(tmp_path, EXPORT)
    theirs, note = nsys_kernels(tmp_path, other_program(tmp_path, domain))
    assert attributed(theirs) == attributed(ours) > 0
    assert "note:" not in quiet
    assert "no ranges in NVTX domain 'lmstudy'" in note and "every domain" in note
    assert (domain or "the default domain") in note


def test_an_explicit_domain_stays_exact_and_says_what_is_there(tmp_path):
    kernels, note = nsys_kernels(tmp_path, other_program(tmp_path, None), "--domain", "lmstudy")
    assert attributed(kernels) == 0
    assert "no ranges in NVTX domain 'lmstudy'" in note and "the default domain" in note


def test_the_jobs_own_reading_stays_exact(tmp_path):
    # A profile job reads its own export: lmstudy's ranges or none, never a library's.
    events = nsys_sqlite.read_events(other_program(tmp_path, None))
    assert events.ranges.empty and events.note


@pytest.mark.parametrize("name", ["a#b", "what?mode=rwc", "100%", "x%20y"])
def test_an_export_path_with_uri_characters_is_read_as_it_is(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    export = folder / "profile.sqlite"
    shutil.copy(EXPORT, export)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    table = kernel_table(nsys_sqlite.read_events(export))
    assert table["instances"].sum() == kernel_table(nsys_sqlite.read_events(EXPORT))["instances"].sum()
    assert nsys_sqlite.nsys_version_of(export) == nsys_sqlite.nsys_version_of(EXPORT)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no stray file


def test_a_missing_export_is_named_and_not_created(tmp_path):
    absent = tmp_path / "a#b.sqlite"
    with pytest.raises(nsys_sqlite.UserError, match="does not exist"):
        nsys_sqlite.read_events(absent)
    assert list(tmp_path.iterdir()) == []


def test_a_non_executable_nsys_is_called_that_not_missing(tmp_path):
    program = tmp_path / "nsys"
    program.write_text("#!/bin/sh\necho 'NVIDIA Nsight Systems version 2025.3.1'\n")
    with pytest.raises(NsysMissing, match="exists but is not executable") as error:
        nsys_version(str(program))
    assert "not found" not in str(error.value) and "chmod +x" in str(error.value)
    program.chmod(0o755)
    assert nsys_version(str(program)) == "NVIDIA Nsight Systems version 2025.3.1"


def test_a_directory_as_nsys_is_called_a_directory(tmp_path):
    with pytest.raises(NsysMissing, match="exists but is a directory"):
        nsys_version(str(tmp_path))


# Item 19: a GPU preset on a machine without CUDA (or nsys) first says there is no CUDA device.
def test_a_gpu_profile_job_without_cuda_or_nsys_first_says_cuda_is_missing(tmp_path):
    done = subprocess.run(
        [
            sys.executable, "-m", "lmstudy", "measure", "nsys", "--out-dir", str(tmp_path / "out"), "--spec",
            json.dumps(spec_fields("nsys", passes=["forward"], device="cuda", backend="nsys",
                                   nsys=str(tmp_path / "no-nsys-here"))),
        ],
        capture_output=True, text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},  # no CUDA device, as on a CPU machine
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: CUDA is not available on this machine")
    assert "preset=smoke" in lines[0] and "Nsight" not in lines[0]
