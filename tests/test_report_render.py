import html as html_lib
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

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
    assert r"F\<a\|b\>\>" in md


def markdown_to_html(text: str) -> str:
    """report.md as a CommonMark reader (with tables, as GitHub's) shows it."""
    return MarkdownIt("commonmark").enable("table").render(text)


def test_kernel_names_and_config_strings_are_literal_text_in_markdown(tmp_path: Path):
    # Issue 13, item 16: what comes from data must not become tags, emphasis, links or headings.
    kernel = "void f<int>(T*, U*) [with a_b_c = **x**] | &amp; `code` ![i](y)"
    title = "<script>alert(1)</script> *study* # one"
    run = "a_b_c"
    section = Section("k", "Kernels <i>x</i>", [
        Text("1. not a list <b>not bold</b> _not em_"),
        Findings([f"top kernel: {kernel}"]),
        Table("top <u>kernels</u>", pd.DataFrame({"kernel": [kernel, "two\nlines"], "share": [0.5, 0.25]})),
    ])
    render([section], {"gpu": "H100 <sm_90> | *fast*"}, REPO / "workflow/templates", tmp_path, title, run)
    shown = markdown_to_html((tmp_path / "report.md").read_text())
    # (The template's own markup stays: a table caption is **bold**.)
    for tag in ("<script", "<b>", "<i>", "<u>", "<em>", "<code>", "<img", "<a ", "<ol>"):
        assert tag not in shown, tag
    for literal in (kernel, title, "1. not a list <b>not bold</b> _not em_", "H100 <sm_90> | *fast*"):
        assert html_lib.escape(literal, quote=False) in shown, literal
    # The kernel table is still a table of two rows, the names whole in their cells.
    assert shown.count("<tr>") == 2 + 3  # environment: header and one row; kernels: header and two rows
    assert f"<td>{html_lib.escape(kernel, quote=False)}</td>" in shown
    assert "<td>two lines</td>" in shown
