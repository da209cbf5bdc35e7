import html as html_lib
from pathlib import Path

import pandas as pd
import pytest
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
    # One format in the column: an exponent for every number where the smallest need one (issue 31).
    assert [wide(v) for v in (786432.0, 0.000977, 0.0078, 0.0)] == ["7.86e+05", "9.77e-04", "7.80e-03", "0"]
    # Three significant digits each, trailing zeros kept: 0.600 beside 1.37, never 0.6.
    spread = column_formatter([1.37, 0.6, 5000.0])
    assert [spread(v) for v in (1.37, 0.6)] == ["1.37", "0.600"]


def test_percentages_have_one_decimal_a_sliver_is_less_than_a_tenth_and_none_is_0():
    from lmstudy.analyse.nsys import tables as T
    from lmstudy.report.render import table_html, table_markdown
    from lmstudy.sections.nsys import section as nsys

    kernels = pd.DataFrame({
        "size": "small", "context_length": 256, "pass": ["forward", "forward", "train_step", "train_step",
                                                         "train_step"],
        "precision": "fp32", "category": ["GEMM", "softmax", "GEMM", "softmax", "other"],
        "total_ns": [812.0, 188.0, 736.0, 264.0 - 0.18, 0.18],
    })
    generic = table_markdown(pd.DataFrame({"GEMM %": [81.24, 73.6], "other %": [0.0, 0.018447]}))
    assert generic.splitlines()[2:] == ["| 81.2 | 0 |", r"| 73.6 | \<0.1 |"], generic
    shown = table_markdown(nsys._as_percent(T.category_shares(kernels)))
    lines = shown.splitlines()
    assert lines[0] == "| size | context | pass | GEMM (%) | softmax (%) | other (%) |"
    assert lines[2].endswith("| 81.2 | 18.8 | 0 |") and lines[3].endswith(r"| 73.6 | 26.4 | \<0.1 |"), shown
    assert "0.0000" not in table_html(nsys._as_percent(T.category_shares(kernels)))


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


def test_each_finding_links_the_rows_behind_it_and_the_function_that_wrote_it(tmp_path: Path):
    from lmstudy.report.finding import Finding, finds

    @finds
    def slowest(frame: pd.DataFrame) -> list[Finding]:
        row = frame.loc[frame["ms"].idxmax()]
        return [Finding(f"{row['size']} is slowest, {row['ms']} ms.", frame.loc[[row.name]])]

    frame = pd.DataFrame({"size": ["small", "=large"], "ms": [1.5, 9.25]})
    section = Section("timing", "T", [Findings([*slowest(frame), *slowest(frame)]), Table("ms", frame)])
    render([section], {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    html = (tmp_path / "index.html").read_text()
    md = (tmp_path / "report.md").read_text()
    # Two findings of one function are named by what they hold: here the same row twice, so by the words.
    words = "finding_timing_slowest_large_is_slowest_9_25"
    for name in (words, f"{words}_2"):
        assert f'href="tables/{name}.csv"' in html and f"(tables/{name}.csv)" in md
        # The rows behind the sentence, neutralised for a spreadsheet like every CSV meant for people.
        assert (tmp_path / f"tables/{name}.csv").read_text().splitlines() == ["size,ms", "'=large,9.25"]
    assert "computed by tests.test_report_render.test_each_finding_links_the_rows_behind_it" in md


def test_a_finding_without_its_data_is_refused_by_the_function_that_wrote_it():
    from lmstudy.report.finding import finds

    @finds
    def bare() -> list[str]:
        return ["a sentence with nothing behind it"]

    with pytest.raises(TypeError, match="bare returned a sentence without its data"):
        bare()


def test_tables_whose_captions_start_alike_are_named_by_what_they_hold(tmp_path: Path):
    frame = pd.DataFrame({"MiB": [1.0]})
    captions = [f"Largest allocations during 2.7B ctx 256 training step {p}" for p in ("fp32", "bf16")]
    section = Section("memory", "M", [Table(c, frame) for c in captions] + [Table("Peak by kind", frame)])
    render([section], {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    names = sorted(p.name for p in (tmp_path / "tables").glob("*.csv"))
    assert names == ["memory_largest_allocations_during_2_7b_ctx_256_training_step_bf16.csv",
                     "memory_largest_allocations_during_2_7b_ctx_256_training_step_fp32.csv",
                     "memory_peak_by_kind.csv"], names


def test_the_header_names_the_environment_in_words(tmp_path: Path):
    render([Section("x", "X", [])], {"gpu": "cpu (x86_64)", "gpu_chosen_by": "none", "tf32_cudnn": "False"},
           REPO / "workflow/templates", tmp_path, "T", "r")
    md = (tmp_path / "report.md").read_text()
    assert "| device | cpu (x86\\_64) |" in md or "| device | cpu (x86_64) |" in md, md
    assert "| GPU chosen by | none |" in md and "| TF32 in cuDNN | False |" in md
    assert "gpu_chosen_by" not in md and "tf32_cudnn" not in md


def test_a_long_sentence_is_shortened_at_a_words_end_and_a_kernel_name_where_it_must():
    from lmstudy.report.render import LONG_TEXT, shorten

    reason = "CUDA graphs (torch.compile mode reduce-overhead) need a CUDA device, and this run is on cpu."
    short = shorten(reason)
    assert short.endswith("need a…") and len(short) <= LONG_TEXT
    kernel = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_bf16_256x128_32x3_nn_align8>(Params)"
    assert len(shorten(kernel)) == LONG_TEXT and kernel.startswith(shorten(kernel)[:-1])
    assert shorten("short") == "short"


# Issue 23, item 8: a bare carriage return in a name breaks neither report.md nor the CSV.
def test_a_carriage_return_in_a_name_keeps_its_row_whole(tmp_path: Path):
    from lmstudy.analyse import result_files
    from lmstudy.atomic import write_csv

    kernel = "gemm\rhalf\r\ntwo"
    frame = pd.DataFrame({"kernel": [kernel, "b"], "share": [0.5, 0.25]})
    section = Section("k", "Kernels", [Table("top", frame)])
    render([section], {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    shown = markdown_to_html((tmp_path / "report.md").read_text())
    assert "<td>gemm half two</td>" in shown and shown.count("<tr>") == 2 + 3
    assert pd.read_csv(tmp_path / "tables/k_top.csv")["kernel"].tolist() == [kernel, "b"]
    # The project's own writer and reader agree on such a name.
    table = tmp_path / "results/nsys/kernels.csv"
    frame = pd.DataFrame({"kernel": [kernel], "kind": ["kernel"], "category": ["GEMM"], "instances": [1],
                          "total_ns": [5], "size": ["tiny"], "context_length": [128], "pass": ["forward"],
                          "status": ["ok"], "profiled_steps": [2]})
    write_csv(table, frame)
    assert result_files.read_csv(table)["kernel"].tolist() == [kernel]


# Issue 23, item 4: text a spreadsheet would evaluate reaches no CSV of the report as a formula.
def test_formulas_in_names_are_neutralised_in_the_reports_csv(tmp_path: Path):
    names = ["=HYPERLINK(\"http://x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "plain", "-3.5"]
    frame = pd.DataFrame({"=kernel": names, "share": [-0.5, 0.1, 0.2, 0.3, 0.4, 0.5]})
    section = Section("k", "K", [Table("top", frame)])
    render([section], {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    written = pd.read_csv(tmp_path / "tables/k_top.csv", dtype=str)
    assert list(written.columns) == ["'=kernel", "share"]
    assert written["'=kernel"].tolist() == [
        "'=HYPERLINK(\"http://x\")", "'+1+cmd|' /C calc'!A0", "'-2+3", "'@SUM(A1)", "plain", "-3.5"
    ]
    assert written["share"].tolist()[0] == "-0.5"  # numbers stay numbers


# Issue 23, item 1: the report reads nothing through a link that leaves the run's folder.
def test_the_report_refuses_a_figure_linked_out_of_the_run(tmp_path: Path):
    import subprocess
    import sys

    secret = tmp_path / "secret"
    secret.write_text("root:hash\n")
    results = tmp_path / "results/r"
    (results / "figures/timing").mkdir(parents=True)
    (results / "figures/timing/step_time.png").symlink_to(secret)
    out = tmp_path / "report/r"
    done = subprocess.run(
        [sys.executable, "-m", "lmstudy", "render_report", "--results", str(results), "--run", "r",
         "--sections", "timing", "--templates", str(REPO / "workflow/templates"), "--out", str(out),
         "--sizes", "small", "--title", "A study", "--full-study", "{}"],
        capture_output=True, text=True,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "step_time.png is a symbolic link to" in lines[0] and "outside" in lines[0]
    assert not any(p.is_file() and p.read_text(errors="replace") == "root:hash\n" for p in tmp_path.rglob("*")
                   if p != secret and not p.is_symlink())


def test_links_inside_the_run_are_kept_and_a_linked_output_folder_is_refused(tmp_path: Path):
    from lmstudy.analyse.links import check_links_inside, check_writable_folder
    from lmstudy.errors import UserError

    run = tmp_path / "r"
    (run / "timing").mkdir(parents=True)
    (run / "timing/timing.csv").write_text("a\n1\n")
    (run / "timing/copy.csv").symlink_to(run / "timing/timing.csv")
    check_links_inside(run)  # a link that stays inside is harmless
    (run / "timing/out").symlink_to("../../elsewhere")
    with pytest.raises(UserError, match="timing/out is a symbolic link to ../../elsewhere"):
        check_links_inside(run)
    report = tmp_path / "report"
    report.mkdir()
    (report / "figures").symlink_to("/etc")
    with pytest.raises(UserError, match="figures is a symbolic link to /etc"):
        check_writable_folder(report)


# Issue 32, item 14: the long page opens with contents that reach each table.
def test_the_page_has_contents_linking_each_section_and_table(tmp_path: Path):
    import re

    frame = pd.DataFrame({"a": [1]})
    sections = [Section("k", "1. Kernels", [Table("top kernels", frame), Text("t")]),
                Section("m", "2. Memory", [Table("peaks", frame)])]
    render(sections, {"gpu": "X"}, REPO / "workflow/templates", tmp_path, "T", "r")
    page = (tmp_path / "index.html").read_text()
    contents = re.search(r'<nav id="contents">(.*?)</nav>', page, re.S).group(1)
    assert "<h2>Contents</h2>" in contents
    for target in re.findall(r'href="#([^"]+)"', contents):
        assert f'id="{target}"' in page, target
    assert ">top kernels</a>" in contents and ">peaks</a>" in contents and 'href="#m"' in contents


def test_a_csv_name_does_not_end_mid_phrase_and_siblings_alike_are_told_by_their_words():
    # Review of the quick report at b9d9ffa: "attention_predicted_vs_measured_memory_of_the.csv",
    # "finding_ladder_steps_small_the_biggest_step_beyond.csv"; "finding_attention_speedups_bf16_2.csv"
    # was the torch.compile finding, named by position.
    from lmstudy.report.finding import Finding
    from lmstudy.report.render import _slug, _what_they_hold

    assert _slug("Predicted vs measured memory of the naive attention") == "predicted_vs_measured_memory"
    assert _slug("small: the biggest step beyond noise is bf16", words=5) == "small_the_biggest_step"
    def rows(precision):
        return pd.DataFrame({"precision": [precision] * 2, "seq_len": [1024, 16384]})

    siblings = [Finding("SDPA is 15.5× faster than naive at seq 16384.", rows("bf16")),
                Finding("SDPA is 3.01× faster than naive at seq 16384.", rows("fp32")),
                Finding("Compiled naive attention is 2.28× faster than eager.", rows("bf16"))]
    assert _what_they_hold(siblings) == ["sdpa_is_15_5_bf16", "fp32", "compiled_naive_attention_bf16"]


def test_a_sections_module_speaks_through_the_template_beside_it():
    import importlib

    from lmstudy.report.contract import wording, words

    speaking = [p for p in sorted((REPO / "lmstudy/sections").glob("*/*.py")) if "_say = " in p.read_text()]
    assert len(speaking) > 20
    for path in speaking:
        module = importlib.import_module(f"lmstudy.sections.{path.parent.name}.{path.stem}")
        assert module._say.args == (path.parent.name, f"{path.stem}.j2"), path
        assert path.with_suffix(".j2").exists(), path
    say = wording("lmstudy.sections.timing.findings")
    assert say("left_out", total=5, kept=3) == words("timing", "findings.j2", "left_out", total=5, kept=3)
    with pytest.raises(ValueError, match="not a section's module"):
        wording("lmstudy.report.compare_cells")
