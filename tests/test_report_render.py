import html as html_lib
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

from lmstudy.report.render import Findings, Section, Table, Text, format_cell, render

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
    # (The template's own markup stays: a table caption is **bold**, its CSV a link.)
    shown = shown.replace('<a href="tables/k_top_u_kernels_u.csv">', "")
    shown = shown.replace('<a id="table-k_top_u_kernels_u"></a>', "")  # the anchor answers link to
    for tag in ("<script", "<b>", "<i>", "<u>", "<em>", "<code>", "<img", "<a ", "<ol>"):
        assert tag not in shown, tag
    for literal in (kernel, title, "1. not a list <b>not bold</b> _not em_", "H100 <sm_90> | *fast*"):
        assert html_lib.escape(literal, quote=False) in shown, literal
    # The kernel table is still a table of two rows, the names whole in their cells.
    assert shown.count("<tr>") == 2 + 3  # environment: header and one row; kernels: header and two rows
    assert f"<td>{html_lib.escape(kernel, quote=False)}</td>" in shown
    assert "<td>two lines</td>" in shown


def test_a_column_has_one_number_format():
    from lmstudy.report.render import column_formatter

    values = [1.0, 15.0, 2.25, "OOM", float("nan")]
    write = column_formatter(values)
    assert [write(v) for v in values] == ["1.00", "15.00", "2.25", "OOM", "n/a"]
    assert column_formatter([1234567, 12])(1234567) == "1,234,567"
    assert column_formatter([0.0001, 0.0002])(0.0001) == "1.00e-04"
    wide = column_formatter([786432.0, 0.000977, 0.0078, 262144.0])  # MiB of a mask and of a huge tensor
    assert [wide(v) for v in (786432.0, 0.000977, 0.0078, 0.0)] == ["786,432", "9.77e-04", "0.0078", "0"]


def test_headers_come_from_one_vocabulary_with_units_in_parentheses():
    from lmstudy.report.render import display_frame

    frame = pd.DataFrame({"context_length": [1], "median ms": [2.0], "MFU %": [3.0], "seq_len": [4]})
    assert list(display_frame(frame).columns) == ["context", "median (ms)", "MFU (%)", "sequence length"]


def test_no_index_column_and_no_phantom_header(tmp_path: Path):
    from lmstudy.report.render import table_html

    wide = pd.DataFrame({"forward": [1.0], "train_step": [2.0]}, index=pd.Index(["tiny"], name="size"))
    wide.columns.name = "pass"  # what pivot_table leaves: a header cell over nothing
    html = str(table_html(wide))
    assert html.count("<th ") == 3 and ">pass<" not in html and ">training step<" in html
    unnamed = pd.DataFrame({"a": [1, 2]}, index=[5, 7])  # a filtered frame's leftover index
    html = str(table_html(unnamed))
    assert html.count("<th ") == 1 and ">5<" not in html and ">index<" not in html


def test_long_text_is_shortened_with_the_whole_on_hover_and_in_the_csv(tmp_path: Path):
    kernel = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_16x3_nt_align4>(T1::Params)" * 2
    table = Table("top", pd.DataFrame({"kernel": [kernel], "share": [0.5]}), name="nsys_top")
    render([Section("k", "K", [table])], {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    html = (tmp_path / "index.html").read_text()
    assert f'title="{html_lib.escape(kernel)}"' in html
    assert f">{html_lib.escape(kernel)}<" not in html  # not whole in the cell
    assert pd.read_csv(tmp_path / "tables/nsys_top.csv")["kernel"].tolist() == [kernel]


def test_oom_not_measured_and_na_are_each_marked(tmp_path: Path):
    from lmstudy.report.render import table_html

    html = str(table_html(pd.DataFrame({"ms": [1.5, "OOM", "not measured", float("nan")]})))
    for css, text in (("oom", "OOM"), ("not-measured", "not measured"), ("na", "n/a")):
        assert 'class="data row' in html and f" {css}\" >{text}</td>" in html, css


def test_each_table_names_its_csv_and_the_function_that_computed_it(tmp_path: Path):
    from lmstudy.analyse.computed import computes_table

    @computes_table
    def shares(n: int) -> pd.DataFrame:
        return pd.DataFrame({"share": [n]})

    section = Section("nsys", "N", [Table("GEMM share (%)", shares(1)), Table("GEMM share (%)", shares(2))])
    render([section], {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    html = (tmp_path / "index.html").read_text()
    assert 'href="tables/nsys_gemm_share.csv"' in html and 'href="tables/nsys_gemm_share_2.csv"' in html
    assert "test_each_table_names_its_csv_and_the_function_that_computed_it.&lt;locals&gt;.shares" in html
    assert (tmp_path / "tables/nsys_gemm_share_2.csv").read_text().splitlines() == ["share", "2"]
