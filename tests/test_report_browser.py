"""The smoke report in a real browser: headless Chromium from Debian's packages, at 1280 px.

No console error, every image loaded, no table or figure wider than the page
(a wide table scrolls inside its own box), no cell that reads nan or None and
no index column. Outside CI the test is skipped where Chromium is missing,
saying how to install it (`make browser`, as root: `make test` itself installs
no system package); in CI (CI set, .ci/run installs it) it must run.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pandas as pd
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
            pytest.fail("Chromium is missing: run `make browser` (as root) before the tests")
        pytest.skip("no Chromium: `make browser` as root (apt-get install --no-install-recommends chromium)"
                    " enables the browser test")
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


def test_real_gpu_kernel_tables_fit_the_page(tmp_path: Path, browser):
    """Section 2's (b), (c) and category tables from the real H200 captures, whose kernel names run
    to 200 characters: each fits the page at 1280 px, the names whole on hover and in the CSV."""
    from lmstudy.analyse.nsys import sqlite
    from lmstudy.analyse.nsys import tables as T
    from lmstudy.analyse.nsys.events import kernel_table
    from lmstudy.report.render import Section, Table, render

    frames = []
    for name, pass_name in (("nsys_forward_fp32", "forward"), ("nsys_train_bf16", "train_step")):
        kernels = kernel_table(sqlite.read_events(REPO / "tests/fixtures/gpu" / f"{name}.sqlite"))
        frames.append(kernels.assign(size="small", context_length=256, pass_=pass_name, profiled_steps=2)
                      .rename(columns={"pass_": "pass"}))
    kernels = pd.concat(frames, ignore_index=True)
    longest = kernels["kernel"].str.len().max()
    assert longest > 150  # the names the issue saw cut off
    section = Section("nsys", "2. Kernel profiles", [
        Table("(b) Top kernel", T.top_kernels(kernels), name="nsys_top_kernels"),
        Table("(c) Top non-GEMM kernels", T.top_non_gemm_forward(kernels), name="nsys_top_non_gemm_forward"),
        Table("Share by category (%)", T.category_shares(kernels), name="nsys_category_shares"),
    ])
    render([section], {"gpu": "NVIDIA H200"}, REPO / "workflow/templates", tmp_path, "T", "gpu")
    found = report_browser.inspect(tmp_path / "index.html", 1280, browser=browser)
    assert report_browser.problems(found) == []
    csv = pd.read_csv(tmp_path / "tables/nsys_top_non_gemm_forward.csv")
    assert csv["kernel"].str.len().max() > 100  # whole in the CSV
