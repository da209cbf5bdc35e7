"""Result files are written whole (write, then rename) and readable as the umask allows."""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest

from .conftest import REPO

WRITE_ALL = """
import os, sys
import pandas as pd
from lmstudy import atomic
os.umask({umask})
atomic.write_text("text.txt", "x")
atomic.write_json("record.json", {{"a": 1}})
atomic.write_csv("table.csv", pd.DataFrame({{"a": [1]}}))
"""


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077, 0o002])
def test_results_honour_the_umask(tmp_path, umask):
    subprocess.run(
        [sys.executable, "-c", WRITE_ALL.format(repo=str(REPO), umask=umask)], cwd=tmp_path, check=True
    )
    for name in ("text.txt", "record.json", "table.csv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json", "table.csv", "text.txt"]


def test_the_umask_is_read_without_changing_it(tmp_path):
    code = (
        "import os; from lmstudy.atomic import current_umask; "
        "os.umask(0o037); assert current_umask() == 0o037; assert os.umask(0) == 0o037"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
