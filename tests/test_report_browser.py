"""The smoke report in a real browser: headless Chromium from Debian's packages, at 1280 px.

No console error, every image loaded, no table or figure wider than the page
(a wide table scrolls inside its own box), no cell that reads nan or None and
no index column. Outside CI the test is skipped where Chromium is missing
(`make install-test` installs it as root); in CI (CI set) it must run.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from .conftest import REPO

_spec = importlib.util.spec_from_file_location("report_browser", REPO / "tools" / "report_browser.py")
report_browser = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_browser)


@pytest.fixture(scope="module")
def browser() -> str:
    found = report_browser.find_browser()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: `make install-test` installs it (apt-get install chromium)")
        pytest.skip("no Chromium here: `apt-get install chromium` (or `make install-test` as root) runs it")
    return found


def test_the_smoke_report_reads_well_in_a_browser_at_1280_px(smoke_run: Path, browser):
    shot = smoke_run / "logs" / "default" / "report_1280.png"
    page = smoke_run / "report/default/index.html"
    found = report_browser.inspect(page, 1280, screenshot=shot, browser=browser)
    assert found["tables"] > 10 and found["figures"] > 5, found
    assert report_browser.problems(found) == []
    assert shot.stat().st_size > 50_000  # the whole page, for a person to look at


def test_the_browser_check_sees_what_a_reader_would(tmp_path: Path, browser):
    page = tmp_path / "index.html"
    page.write_text(
        "<html><body><script>console.error('boom')</script><img src='missing.png'>"
        "<table><tr><th>index</th><th>a</th></tr><tr><td>0</td><td>nan</td></tr></table>"
        "<div style='width: 3000px'>wide</div></body></html>"
    )
    said = "\n".join(report_browser.problems(report_browser.inspect(page, 1280, browser=browser)))
    for expected in ("console error: boom", "image not loaded: missing.png", "3008 px wide",
                     'cell "nan"', 'header "index"'):
        assert expected in said, said
