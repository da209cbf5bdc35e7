"""Render the report (HTML and Markdown) from the sections' blocks."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path

import jinja2
import pandas as pd
from markupsafe import Markup, escape
from pandas.io.formats.style import Styler

from lmstudy.analyse import result_files
from lmstudy.analyse.links import check_links_inside, check_writable_folder
from lmstudy.atomic import write_bytes, write_csv, write_text
from lmstudy.report.finding import Finding

MISSING = "n/a"


@dataclasses.dataclass
class Table:
    caption: str
    frame: pd.DataFrame
    note: str = ""
    # The CSV it is written to under the report's tables/, named by content
    # ("timing_step_time"); without one, the section's key and the caption's words.
    name: str = ""
    # The function that computed it (lmstudy.analyse.computed), dotted; from the frame when not given.
    computed_by: str = ""
    csv: str = ""  # its CSV's path relative to the report, set when rendering

    def __post_init__(self) -> None:
        from lmstudy.analyse.computed import computed_by

        self.computed_by = self.computed_by or computed_by(self.frame)


@dataclasses.dataclass
class Figure:
    path: Path  # a PNG the section drew; copied next to the report
    caption: str
    src: str = ""  # its path relative to the report, set when rendering; "" if missing
    data: str = ""  # the name of the table (its CSV) that holds the numbers drawn
    drawn_by: str = ""  # the function that drew it, dotted
    csv: str = ""  # that table's CSV relative to the report, set when rendering


@dataclasses.dataclass
class Text:
    text: str


@dataclasses.dataclass
class Findings:
    items: list[Finding]


@dataclasses.dataclass
class Section:
    key: str
    title: str
    blocks: list = dataclasses.field(default_factory=list)

    def add(self, block) -> Section:
        self.blocks.append(block)
        return self


def format_cell(value) -> str:
    """One value alone, as a reader wants it: missing as n/a, floats rounded (see column_formatter)."""
    if _is_missing(value):
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


def _is_missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _number(value) -> float | None:
    """`value` as a number, or None for text (OOM, n/a, a name) and bools."""
    if isinstance(value, bool) or _is_missing(value):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        import numpy as np

        if isinstance(value, np.number):
            return float(value)
    except ImportError:  # pragma: no cover
        pass
    return None


def column_formatter(values) -> Callable[[object], str]:
    """How every number of one column is written: one precision for the whole column.

    Whole numbers get thousands separators; other numbers as many decimals
    as three significant digits of the column's typical (median) magnitude
    need, so 1.0 and 15.0 in one column read 1.00 and 15.00, not 1 and 15.0.
    A column spanning more than three orders of magnitude (bytes of a 32x32
    mask beside those of a 2^30-wide tensor) gets three significant digits
    per number instead. Text (OOM, not measured, n/a, names) stays as it is;
    missing is n/a.
    """
    numbers = [n for n in (_number(v) for v in values) if n is not None]
    whole = all(float(n).is_integer() and abs(n) < 1e15 for n in numbers)
    nonzero = sorted(abs(n) for n in numbers if n)
    spread = bool(nonzero) and nonzero[-1] / nonzero[0] > 1e3
    if whole or not nonzero:
        decimals, scientific = 0, False
    else:
        typical = nonzero[len(nonzero) // 2]
        scientific = typical < 1e-3 or typical >= 1e9
        decimals = min(6, max(0, 2 - math.floor(math.log10(typical))))
    if spread and nonzero[0] < 1e-3:
        # A column that needs an exponent for its smallest numbers writes every number with one:
        # 9.92e-04 beside 1.25e+01, never beside 12.5.
        spread, scientific = False, True

    def write(value) -> str:
        number = _number(value)
        if number is None:
            return MISSING if _is_missing(value) else str(value)
        if whole or not number:
            return f"{number:,.{decimals}f}"
        if spread:
            if abs(number) >= 100:
                return f"{number:,.0f}"
            # "#": 0.600 beside 1.37, not 0.6 (g drops trailing zeros)
            return f"{number:#.3g}" if abs(number) >= 1e-3 else f"{number:.2e}"
        if scientific:
            return f"{number:.2e}"
        return f"{number:,.{decimals}f}"

    return write


def percent_formatter(values) -> Callable[[object], str]:
    """How a column of percentages (its header ends in "(%)") is written: one decimal for every
    table, 0 as "0", and a share too small for one decimal as "<0.1" (never 0.0000 beside 4.05)."""
    plain = column_formatter(values)

    def write(value) -> str:
        number = _number(value)
        if number is None or not math.isfinite(number):
            return plain(value)
        if number == 0:
            return "0"
        if abs(number) < 0.05:
            return "<0.1" if number > 0 else ">−0.1"
        return f"{number:,.1f}"

    return write


def formatter(header: str, values) -> Callable[[object], str]:
    """The writer of one displayed column: percentages by `percent_formatter`, the rest by
    `column_formatter`."""
    return percent_formatter(values) if header.endswith("(%)") else column_formatter(values)


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as the report shows it, values untouched: a named index becomes columns (an
    unnamed one is dropped, never shown as a column of row numbers), multi-level headers become
    one line, and every header a human label from lmstudy.report.labels."""
    from lmstudy.report.labels import PASS_LABELS, column_label

    if not isinstance(frame.index, pd.RangeIndex):
        named = any(name is not None for name in frame.index.names)
        frame = frame.reset_index(drop=not named)
    frame = frame.copy()
    if isinstance(frame.columns, pd.MultiIndex):
        frame.columns = [" ".join(str(c) for c in col if str(c)) for col in frame.columns]
    frame.columns = [column_label(str(c)) for c in frame.columns]
    frame.columns.name = None
    for column in frame.columns[frame.columns == "pass"]:
        # Passes by their names in the text: "training step", never train_step.
        frame[column] = frame[column].map(lambda p: PASS_LABELS.get(p, p) if isinstance(p, str) else p)
    return flags_beside_the_time(frame)


def flags_beside_the_time(frame: pd.DataFrame) -> pd.DataFrame:
    """A table's flags column (†‡) moved beside the number it qualifies, the first median or time
    column, where a reader looks, not at the far end of a wide table."""
    if "flags" not in frame.columns:
        return frame
    times = [c for c in frame.columns
             if c != "flags" and (c.startswith("median") or c.endswith((" ms", "(ms)")))]
    if not times:
        return frame
    order = [c for c in frame.columns if c != "flags"]
    order.insert(order.index(times[0]) + 1, "flags")
    return frame[order]


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    frame = display_frame(frame)
    return pd.DataFrame(
        {column: [formatter(column, frame[column])(v) for v in frame[column]] for column in frame.columns},
        columns=frame.columns,
    ).astype(object)


# Markdown reads these anywhere in a line as markup (emphasis, code, links,
# HTML tags, entities, table cells); a backslash makes each literal text.
# '_' only where it could open or close emphasis: inside a word (tf32_matmul)
# it cannot, and stays as it is for whoever reads the file itself.
_MARKDOWN_INLINE = re.compile(r"([\\`*\[\]<>|#~&!]|(?<![^\W_])_|_(?![^\W_]))")
# and these at the start of a line (list items, headings underlined, quotes).
_MARKDOWN_LINE_START = re.compile(r"^(\s*(?:\d+)?)([-+=.)])", re.MULTILINE)


def markdown_text(value, cell: bool = False) -> str:
    """`value` as literal text in Markdown, as autoescape makes it literal text in HTML.

    Kernel names (`void f<float>`, `a_b_c*`), config strings and paths come
    from data: unescaped, Markdown would turn them into tags, emphasis or links.
    A table `cell` starts no line: 10.5 or -3 there is a number, not a list item.
    """
    text = _MARKDOWN_INLINE.sub(r"\\\1", str(value))
    if cell:
        return text
    return _MARKDOWN_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def _markdown_output(value) -> str:
    """What a {{ }} in the Markdown template writes: already-built markup as it is, all else escaped."""
    return value if isinstance(value, Markup) else markdown_text(value)


# What ends a line for a Markdown reader or an editor: a cell holding one would end its row.
_LINE_BREAKS = re.compile("[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")


def table_markdown(frame: pd.DataFrame) -> Markup:
    frame = _display(frame)

    def cells(row) -> str:
        # A cell is one line of the table: a newline in a value would end it.
        return "| " + " | ".join(_LINE_BREAKS.sub(" ", markdown_text(c, cell=True)) for c in row) + " |"

    lines = [cells(frame.columns), "|" + "|".join("---" for _ in frame.columns) + "|"]
    lines += [cells(row) for row in frame.itertuples(index=False)]
    return Markup("\n".join(lines))


_TABLE_NUMBERS = itertools.count(1)
# A cell longer than this (a kernel's full C++ signature) shows its start, the rest on hover.
LONG_TEXT = 60
# Cell text that is a result, not a number: each shown in its own way (see the HTML template).
STATUS_CLASSES = {"OOM": "oom", "unsupported": "unsupported", "not applicable": "unsupported",
                  "not measured": "not-measured", MISSING: "na"}


def shorten(text: str, width: int = LONG_TEXT) -> str:
    """`text` cut to `width` characters with "…": at a word's end where the cut keeps at least half,
    so a sentence does not end mid-word ("need a CUD…"); a kernel name, one long word, is cut where
    it must be. (textwrap.shorten would show a long first word as "…" alone.)"""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    if space >= width // 2 and text[width - 1] != " ":
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def _status_class(text: str) -> str:
    for status, css in STATUS_CLASSES.items():
        if text == status or text.startswith(f"{status} "):
            return css
    return ""


def short_texts(values, limit: int = LONG_TEXT) -> dict[str, str]:
    """Each text longer than `limit` as a reader tells it from the others: what it shares with
    the other long texts of its column at the start and at the end is cut, the part where they
    differ is kept. Two kernels `void at::native::elementwise_kernel<128, 2, ...MulFunctor...>`
    and `...<128, 2, ...CopyFunctor...>` read `void at::native::el…MulFunctor…` and
    `…CopyFunctor…`, not two identical starts."""
    import os

    long = sorted({str(v) for v in values if isinstance(v, str) and len(v) > limit})
    head = 20  # of a shared start, enough to tell what kind of thing it is
    if len(long) < 2:
        return {v: v[: limit - 1].rstrip() + "…" for v in long}
    prefix = len(os.path.commonprefix(long))
    suffix = len(os.path.commonprefix([v[::-1] for v in long]))
    shown = {}
    for value in long:
        end = max(prefix, len(value) - suffix)
        # Namespaces and repeated element types say nothing that tells two kernels apart.
        middle = re.sub(r"\b(?:float|double|bool|int|long|Half|BFloat16), ", "", value[prefix:end])
        middle = re.sub(r"(?:\b[A-Za-z_]\w*|\(anonymous namespace\))::(?=[A-Za-z_(])", "", middle)
        start = value[: min(prefix, head)] + ("…" if prefix > head else "")
        budget = max(limit - len(start) - 1, 10)
        middle = middle if len(middle) <= budget else middle[: budget - 1] + "…"
        text = start + middle + ("…" if end < len(value) and not middle.endswith("…") else "")
        shown[value] = text
    return shown


def table_html(frame: pd.DataFrame) -> Markup:
    """The table as HTML through pandas' Styler: per-column number formats, text escaped
    (kernel names like `void f<int>` stay text), long text shortened with the whole on hover,
    OOM / not measured / n/a each with a class of its own, numbers right-aligned."""
    frame = display_frame(frame)
    shown = {column: formatter(column, frame[column]) for column in frame.columns}

    shortened = {column: short_texts([shown[column](v) for v in frame[column]]) for column in frame.columns}

    def cell(column):
        def write(value) -> str:
            text = shown[column](value)
            if len(text) > LONG_TEXT:
                short = shortened[column].get(text) or shorten(text)
                return str(Markup('<span title="{}">{}</span>').format(text, short))
            return str(escape(text))

        return write

    # A row a flag (†‡) marks is muted as a whole: its numbers are the host's or noise.
    flagged = (frame["flags"].fillna("").astype(str) != "") if "flags" in frame else pd.Series(
        False, index=frame.index)
    classes = pd.DataFrame(
        {
            column: [
                " ".join(c for c in (
                    "num" if _number(v) is not None else "text", _status_class(shown[column](v)),
                    "flagged" if mark else "",
                ) if c)
                for v, mark in zip(frame[column], flagged, strict=True)
            ]
            for column in frame.columns
        },
        index=frame.index,
        columns=frame.columns,
    )
    styler = (
        Styler(frame, cell_ids=False, uuid_len=0)
        .format({column: cell(column) for column in frame.columns}, escape=None)
        .format_index(escape="html", axis=1)
        .hide(axis="index")
        .set_td_classes(classes)
        .set_table_attributes('class="data"')
    )
    html = styler.to_html(table_uuid=f"t{next(_TABLE_NUMBERS)}")
    return Markup(f'<div class="table-wrap">\n{html}</div>')


def build_sections(contracts: list, results: Path, figures: Path) -> list[Section]:
    """Each section of `contracts` (lmstudy.sections.contracts, in the report's order) built
    from results/<run> and its figures in figures/<name>."""
    sections = []
    for contract in contracts:
        section = contract.build(results, figures / contract.name)
        for block in section.blocks:
            if isinstance(block, Figure) and not block.drawn_by:
                block.drawn_by = contract.drawn_by
        sections.append(section)
    return sections


# Words a name never ends on: cut there, a name reads as a phrase cut off ("memory_of_the").
_DANGLING = {"a", "an", "and", "are", "as", "at", "beyond", "by", "for", "from", "in", "is", "its", "of",
             "on", "or", "over", "than", "that", "the", "to", "vs", "was", "were", "with", "within"}


def _slug(text: str, words: int = 6) -> str:
    text = re.sub(r"\([^)]*\)", " ", text)  # "(a)", "(%)", "(warm-up 5)": not content
    kept = re.findall(r"[a-z0-9]+", text.lower())[:words]
    while len(kept) > 1 and kept[-1] in _DANGLING:
        kept.pop()
    return "_".join(kept)


def _unique(base: str, taken: set[str]) -> str:
    """`base`, or base_2, base_3, ...: the first not in `taken`, which it joins."""
    name, number = base, 2
    while name in taken:
        name, number = f"{base}_{number}", number + 1
    taken.add(name)
    return name


def name_tables(sections: list[Section]) -> set[str]:
    """Give every table its CSV's path (tables/<name>.csv, unique), and every figure its data's;
    returns the names taken."""
    taken: set[str] = set()
    # Captions that share their first words (one table per size, context, ...) are named by
    # their whole caption: a number would name them by position, not by what they hold.
    short = [f"{s.key}_{_slug(b.caption)}" for s in sections for b in s.blocks
             if isinstance(b, Table) and not b.name]
    shared = {n for n in short if short.count(n) > 1}
    for section in sections:
        names = {}
        for block in section.blocks:
            if isinstance(block, Table):
                base = block.name or f"{section.key}_{_slug(block.caption)}"
                if base in shared and not block.name:
                    base = f"{section.key}_{_slug(block.caption, words=20)}"
                name = _unique(base, taken)
                block.csv = f"tables/{name}.csv"
                names[block.name or name] = block.csv
        for block in section.blocks:
            if isinstance(block, Figure) and block.data:
                block.csv = names.get(block.data, f"tables/{block.data}.csv")
    return taken


def _shared(finding: Finding) -> dict[str, str]:
    """The configuration a finding's rows share (a pass, a size, a precision)."""
    from lmstudy.report.finding import CONFIGURATION

    data = finding.data
    return {c: str(data[c].iloc[0]) for c in (*CONFIGURATION, "phase", "rung", "implementation")
            if c in data and len(data) and data[c].nunique(dropna=False) == 1}


def _what_they_hold(siblings: list[Finding]) -> list[str]:
    """What tells each finding's data from its siblings' (one function, several findings): the part
    of the configuration its rows share that differs between them, else its sentence's first words."""
    shared = [_shared(f) for f in siblings]
    differ = [k for k in dict.fromkeys(k for s in shared for k in s)
              if len({s.get(k) for s in shared}) > 1]
    keys = [_slug(" ".join(s[k] for k in differ if k in s)) for s in shared]
    # Where the configuration does not tell two apart (both bf16), their sentences' first words join it:
    # a number (_2) would name the second by position, not by what it holds.
    return [("_".join((_slug(str(f), words=4), n)) if keys.count(n) > 1 else n) if n
            else _slug(str(f), words=5) for f, n in zip(siblings, keys, strict=True)]


def name_finding_data(sections: list[Section], taken: set[str]) -> None:
    """Give every finding's data its CSV's path: tables/finding_<section>_<function>.csv, and where a
    function wrote several findings, each named by what it holds (finding_timing_speedups_train_step),
    never by its position."""
    for section in sections:
        for block in section.blocks:
            if not isinstance(block, Findings):
                continue
            items = [item for item in block.items if isinstance(item, Finding)]
            functions = [item.computed_by.rsplit(".", 1)[-1].strip("_") or "finding" for item in items]
            held = {}
            for function in set(functions):
                siblings = [i for i, f in zip(items, functions, strict=True) if f == function]
                if len(siblings) > 1:
                    held.update(zip(map(id, siblings), _what_they_hold(siblings), strict=True))
            for item, function in zip(items, functions, strict=True):
                base = f"finding_{section.key}_{function}"
                if id(item) in held:
                    base += f"_{held[id(item)]}"
                item.csv = f"tables/{_unique(base, taken)}.csv"


def _anchor(block, section) -> str:
    """The id of a table or figure in the page, for the answers that point at it."""
    from lmstudy.report import answers

    if isinstance(block, Table):
        return answers.table_anchor(block.csv.removeprefix("tables/").removesuffix(".csv"))
    return answers.figure_anchor(section.key, block.path.name)


def link_answers(sections) -> None:
    """Point every answer at its source's anchor; sources not drawn or not shown stay unlinked."""
    from lmstudy.report.answers import Answers, figure_anchor, table_anchor

    for section in sections:
        anchors = {}
        for block in section.blocks:
            if isinstance(block, Table) and block.csv:
                name = block.csv.removeprefix("tables/").removesuffix(".csv")
                anchors[name] = table_anchor(name)
                if block.name:
                    anchors.setdefault(block.name, table_anchor(name))
            elif isinstance(block, Figure) and block.src:
                anchors[block.path.name] = figure_anchor(section.key, block.path.name)
        for block in section.blocks:
            if isinstance(block, Answers):
                for answer in block.items:
                    answer.section = section.key
                    answer.href = f"#{anchors[answer.source]}" if answer.source in anchors else ""


def render(
    sections: list[Section],
    environment: dict[str, str],
    templates: Path,
    out_dir: Path,
    title: str,
    run: str,
    template: str = "report",
    **context,
) -> None:
    """Write out_dir/index.html and out_dir/report.md, figures and tables (CSV) beside them.

    `template`: the templates <template>.html.j2 and <template>.md.j2 in
    `templates`; `context`: what else they show (a comparison's header).
    """
    check_writable_folder(out_dir)
    from lmstudy.report.labels import environment_label

    environment = {environment_label(k): v for k, v in environment.items()}
    from lmstudy.report import answers

    name_finding_data(sections, name_tables(sections))
    _write_tables(sections, out_dir)
    _copy_figures(sections, out_dir)
    # Answers link to the tables and figures just named and copied; the summary gathers them.
    link_answers(sections)
    context.setdefault("summary", answers.summary(sections))
    for fmt, name in (("html", "index.html"), ("md", "report.md")):
        text = _page_templates(templates, fmt).get_template(f"{template}.{fmt}.j2").render(
            title=title, run=run, environment=environment, sections=sections,
            escape=escape, **context,
        )
        write_text(out_dir / name, text)


def _write_tables(sections: list[Section], out_dir: Path) -> None:
    """Each table's CSV and each finding's rows behind it, at the paths their names gave them."""
    tables_dir = out_dir / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    for section in sections:
        for block in section.blocks:
            if isinstance(block, Table):
                write_csv(out_dir / block.csv, display_frame(block.frame))
            elif isinstance(block, Findings):
                for item in block.items:
                    if isinstance(item, Finding):
                        write_csv(out_dir / item.csv, display_frame(item.data))


def _copy_figures(sections: list[Section], out_dir: Path) -> None:
    """Each figure that was drawn, copied into out_dir/figures/ under its section's name (its src says
    where)."""
    figure_dir = out_dir / "figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    for section in sections:
        for block in section.blocks:
            if isinstance(block, Figure) and block.path.exists():
                block.src = f"figures/{section.key}_{block.path.name}"
                # Written beside, then renamed: a link left where the figure goes is replaced, never followed.
                write_bytes(out_dir / block.src, block.path.read_bytes())


def _page_templates(templates: Path, fmt: str) -> jinja2.Environment:
    """The page's templates for `fmt` ("html": escaped; "md": Markdown-escaped), with the tests and
    filters they use to tell blocks apart and write tables."""
    from lmstudy.report import answers

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
    # What the contents list: each table, and each figure that was drawn.
    env.tests["listed"] = lambda b: isinstance(b, Table) or (isinstance(b, Figure) and bool(b.src))
    env.tests["text"] = lambda b: isinstance(b, Text)
    env.tests["findings"] = lambda b: isinstance(b, Findings)
    env.tests["finding"] = lambda b: isinstance(b, Finding)
    env.tests["answers"] = lambda b: isinstance(b, answers.Answers)
    env.filters["anchor"] = _anchor
    return env


def render_study(
    results: Path,
    run: str,
    contracts: list,
    templates: Path,
    out_dir: Path,
    title: str,
    environment_tables: list[Path] = (),
) -> None:
    """Build every section from results/<run> and render the report into out_dir.

    The header's environment comes from `environment_tables` (the aggregated
    tables the workflow hands over), never from whatever lies in the folder.
    """
    from lmstudy.analyse.study_cost import most_at_once, shared_host
    from lmstudy.analyse.tables import environment_of, read_result

    check_links_inside(results)
    sections = build_sections(contracts, results, results / "figures")
    frames = [read_result(Path(p)) for p in environment_tables]
    environment = environment_of(frames)
    jobs = result_files.read_csv(results / "cost" / "jobs.csv", missing_ok=True)
    if not jobs.empty and "measuring" in jobs:
        # Two measurements at once on one machine share its CPU and memory bandwidth: the header says so.
        environment["measuring_jobs_at_once"] = str(most_at_once(jobs[jobs["measuring"].astype(bool)]))
        shared = shared_host(results, jobs)
        if shared:
            environment["other studies on the host"] = shared
    render(sections, environment, templates, out_dir, title, run)
