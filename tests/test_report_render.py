from pathlib import Path

import pandas as pd

from lmstudy.report import Findings, Section, Table, Text, format_cell, render

from .conftest import REPO


def test_cells_show_missing_values_as_na():
    assert format_cell(float("nan")) == "n/a"
    assert format_cell(None) == "n/a"
    assert format_cell(1234.5) == "1,234"
    assert format_cell("OOM") == "OOM"


def test_kernel_names_are_escaped_in_html_and_pipes_in_markdown(tmp_path: Path):
    name = "void at::native::elementwise_kernel<128, 4, F<a|b>>(int, T)"
    section = Section("k", "Kernels", [
        Text("Kernels <b>not bold</b>"),
        Findings([f"top kernel: {name}"]),
        Table("top", pd.DataFrame({"kernel": [name], "share": [0.5]})),
    ])
    render([section], {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    html = (tmp_path / "index.html").read_text()
    assert "elementwise_kernel&lt;128, 4, F&lt;a|b&gt;&gt;" in html
    assert "<b>not bold</b>" not in html and "elementwise_kernel<128" not in html
    md = (tmp_path / "report.md").read_text()
    assert r"F<a\|b>>" in md
