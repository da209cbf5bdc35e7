"""Render the report (HTML and Markdown) from the sections' blocks."""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
from pathlib import Path

import jinja2
import pandas as pd
from markupsafe import Markup, escape

from lmstudy.atomic import write_text

MISSING = "n/a"


@dataclasses.dataclass
class Table:
    caption: str
    frame: pd.DataFrame
    note: str = ""


@dataclasses.dataclass
class Figure:
    path: Path  # a PNG the section drew; copied next to the report
    caption: str
    src: str = ""  # its path relative to the report, set when rendering; "" if missing


@dataclasses.dataclass
class Text:
    text: str


@dataclasses.dataclass
class Findings:
    items: list[str]


@dataclasses.dataclass
class Section:
    key: str
    title: str
    blocks: list = dataclasses.field(default_factory=list)

    def add(self, block) -> Section:
        self.blocks.append(block)
        return self


def format_cell(value) -> str:
    """Show a value as a reader wants it: missing as n/a, floats rounded."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float):
        if value == 0:
            return "0"
        magnitude = abs(value)
        if magnitude >= 1000:
            return f"{value:,.0f}"
        if magnitude >= 10:
            return f"{value:.1f}"
        if magnitude >= 0.01:
            return f"{value:.3g}"
        return f"{value:.2e}"
    return str(value)


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.reset_index() if not isinstance(frame.index, pd.RangeIndex) else frame
    if isinstance(frame.columns, pd.MultiIndex):
        frame.columns = [" ".join(str(c) for c in col if str(c)) for col in frame.columns]
    return frame.astype(object).map(format_cell)


# Markdown reads these anywhere in a line as markup (emphasis, code, links,
# HTML tags, entities, table cells); a backslash makes each literal text.
# '_' only where it could open or close emphasis: inside a word (tf32_matmul)
# it cannot, and stays as it is for whoever reads the file itself.
_MARKDOWN_INLINE = re.compile(r"([\\`*\[\]<>|#~&!]|(?<![^\W_])_|_(?![^\W_]))")
# and these at the start of a line (list items, headings underlined, quotes).
_MARKDOWN_LINE_START = re.compile(r"^(\s*(?:\d+)?)([-+=.)])", re.MULTILINE)


def markdown_text(value) -> str:
    """`value` as literal text in Markdown, as autoescape makes it literal text in HTML.

    Kernel names (`void f<float>`, `a_b_c*`), config strings and paths come
    from data: unescaped, Markdown would turn them into tags, emphasis or links.
    """
    text = _MARKDOWN_INLINE.sub(r"\\\1", str(value))
    return _MARKDOWN_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def _markdown_output(value) -> str:
    """What a {{ }} in the Markdown template writes: already-built markup as it is, all else escaped."""
    return value if isinstance(value, Markup) else markdown_text(value)


def table_markdown(frame: pd.DataFrame) -> Markup:
    frame = _display(frame)

    def cells(row) -> str:
        # A cell is one line of the table: a newline in a value would end it.
        return "| " + " | ".join(markdown_text(c).replace("\n", " ") for c in row) + " |"

    lines = [cells(frame.columns), "|" + "|".join("---" for _ in frame.columns) + "|"]
    lines += [cells(row) for row in frame.itertuples(index=False)]
    return Markup("\n".join(lines))


def table_html(frame: pd.DataFrame) -> Markup:
    # pandas escapes cell text, so kernel names like `void f<int>` stay text.
    return Markup(_display(frame).to_html(index=False, escape=True, border=0, classes="data"))


def build_sections(names: list[str], results: Path, figures: Path) -> list[Section]:
    sections = []
    for name in names:
        module = importlib.import_module(f"lmstudy.sections.{name}")
        sections.append(module.build(results, figures / name))
    return sections


def render(
    sections: list[Section],
    environment: dict[str, str],
    templates: Path,
    out_dir: Path,
    title: str,
    run: str,
) -> None:
    """Write out_dir/index.html and out_dir/report.md, figures beside them."""
    figure_dir = out_dir / "figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    for section in sections:
        for block in section.blocks:
            if isinstance(block, Figure) and block.path.exists():
                block.src = f"figures/{section.key}_{block.path.name}"
                (out_dir / block.src).write_bytes(block.path.read_bytes())
    for fmt, name in (("html", "index.html"), ("md", "report.md")):
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(templates),
            autoescape=(fmt == "html"),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=None if fmt == "html" else _markdown_output,
        )
        env.filters["table"] = table_html if fmt == "html" else table_markdown
        env.tests["table"] = lambda b: isinstance(b, Table)
        env.tests["figure"] = lambda b: isinstance(b, Figure)
        env.tests["text"] = lambda b: isinstance(b, Text)
        env.tests["findings"] = lambda b: isinstance(b, Findings)
        text = env.get_template(f"report.{fmt}.j2").render(
            title=title, run=run, environment=environment, sections=sections,
            escape=escape,
        )
        write_text(out_dir / name, text)


def render_study(
    results: Path,
    run: str,
    section_names: list[str],
    templates: Path,
    out_dir: Path,
    title: str,
    environment_tables: list[Path] = (),
) -> None:
    """Build every section from results/<run> and render the report into out_dir.

    The header's environment comes from `environment_tables` (the aggregated
    tables the workflow hands over), never from whatever lies in the folder.
    """
    from lmstudy.tables import environment_of, read_result

    sections = build_sections(section_names, results, results / "figures")
    frames = [read_result(Path(p)) for p in environment_tables]
    render(sections, environment_of(frames), templates, out_dir, title, run)
    tables_dir = out_dir / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    for section in sections:
        tables = [b for b in section.blocks if isinstance(b, Table)]
        for number, table in enumerate(tables, start=1):
            write_text(tables_dir / f"{section.key}_{number}.csv", table.frame.to_csv(index=False))
