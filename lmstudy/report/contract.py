"""What a report section declares, once: the contract the report and the comparison are generic over.

Each section package lmstudy/sections/<name>/ ends with one
``SECTION = SectionContract(...)``; lmstudy.registry.NAMES lists the
packages in the report's order. The study's report builds and draws every
registered section through its contract (lmstudy.report.render), the comparison
of two runs calls each contract's ``compare`` (lmstudy.report.compare), and the
tests iterate over the same registry. No torch, no matplotlib here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from pathlib import Path

import jinja2
import pandas as pd

from lmstudy.analyse import result_files


@dataclasses.dataclass
class ComparedRuns:
    """Two runs as a section's comparison sees them: A and B (lmstudy.analyse.compare.runs.Run), the
    smallest change a verdict calls faster or slower, the folder its figures go to, and what one
    section computed that another reuses (the ladder of runs without a ladder table reads the timing
    section's matched rows)."""

    a: object
    b: object
    min_effect: float
    figures: Path
    shared: dict = dataclasses.field(default_factory=dict)
    # lmstudy.analyse.compare.verdict.Noise: the flags' thresholds and the GPU time's agreement;
    # None: config.yaml's.
    noise: object = None

    def __post_init__(self):
        if self.noise is None:
            from lmstudy.analyse.compare.verdict import noise_of_study

            self.noise = noise_of_study()

    def once(self, key: str, compute: Callable[[], object]):
        """`compute()`, computed once per comparison under `key`."""
        if key not in self.shared:
            self.shared[key] = compute()
        return self.shared[key]


@dataclasses.dataclass(frozen=True)
class Comparison:
    """How two runs of a section compare: the products it reads from each run (keys of the
    section's ``products``) and the function that builds its part of the comparison report."""

    reads: tuple[str, ...]
    build: Callable[[ComparedRuns], object]  # -> lmstudy.report.render.Section
    # The small functions that write its findings, each marked @finds like the section's own: a
    # comparison's sentence carries the rows of A and B it compared.
    findings: tuple[Callable, ...] = ()


@functools.cache
def _prose() -> jinja2.Environment:
    """The sections' wording (lmstudy/sections/<name>/*.j2), and the wording the sections share
    (lmstudy/report/*.j2, as section "report"), as plain text: the report escapes a Text block for HTML
    and Markdown itself. `fmt` formats a number as Python's format() does ({{ x|fmt(".3g") }}), so that
    a sentence moved into a template reads the same."""
    here = Path(__file__).parent
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [
                jinja2.PrefixLoader({"report": jinja2.FileSystemLoader(here)}),
                jinja2.FileSystemLoader(here.parent / "sections"),
            ]
        ),
        undefined=jinja2.StrictUndefined,
    )
    env.filters["fmt"] = format
    return env


def words(section: str, template: str, macro: str, **values) -> str:
    """One passage of a section's wording: the macro `macro` of lmstudy/sections/<section>/<template>
    (lmstudy/report/<template> where `section` is "report") called with `values`, its lines joined by
    single spaces (a template wraps freely)."""
    called = getattr(_prose().get_template(f"{section}/{template}").module, macro)
    return " ".join(str(called(**values)).split())


def wording(module: str) -> Callable[..., str]:
    """`words` of the template beside a section's module, named by the module's `__name__`:
    lmstudy.sections.<section>.<name> speaks through lmstudy/sections/<section>/<name>.j2, so that a
    module cannot name another file's wording by mistake. Called as `_say(macro, **values)`."""
    *package, section, name = module.split(".")
    if package != ["lmstudy", "sections"]:
        raise ValueError(f"{module} is not a section's module (lmstudy.sections.<section>.<name>)")
    return functools.partial(words, section, f"{name}.j2")


def _frame_is_empty(data) -> bool:
    return data.empty


@dataclasses.dataclass(frozen=True)
class SectionContract:
    name: str  # the package's name, the rule file's (workflow/rules/<name>.smk) and the report's key
    title: str  # its heading in the report, unnumbered: its number is its place in NAMES
    measures: str  # what it measures, in one sentence (the README's and the docs' list)
    # Every product it reads, by key: a path under results/<run>/ ("timing/timing.csv").
    products: Mapping[str, str]
    # (section, what load() read, results/<run>, the folder of its figures) -> None: adds its own blocks
    # to its part of the report, in order, once build() has found something to show (see build()).
    body: Callable[[object, object, Path, Path], None]
    # The sentence its part of the report says where load() found nothing to show.
    empty: str
    # (results/<run>) -> what body() reads; None: its first product, as a frame.
    load: Callable[[Path], object] | None = None
    # (what load() read) -> True where there is nothing to show; None: the frame is empty.
    nothing: Callable[[object], bool] | None = None
    # The config keys whose values the run may have left out (lmstudy.report.coverage), in its words.
    coverage: tuple[str, ...] = ()
    # (results/<run>, a folder that exists) -> None: draws its PNGs; None for a section without figures.
    make_figures: Callable[[Path, Path], None] | None = None
    # Declared for a reader and the tests; build() places them:
    tables: tuple[Callable, ...] = ()  # the functions that compute its tables
    figures: tuple[str, ...] = ()  # the PNG files it may draw
    # The small functions that write its findings, each marked @finds (lmstudy.report.finding) and
    # returning Finding(sentence, the rows behind it): the report links each finding to its rows.
    findings: tuple[Callable, ...] = ()
    answers: Callable | None = None  # the function that answers the course's questions
    compare: Comparison | None = None  # None: the comparison of two runs leaves it out

    @property
    def heading(self) -> str:
        """Its title numbered by its place in the registry (lmstudy.registry.NAMES)."""
        from lmstudy.registry import numbered

        return numbered(self.name, self.title)

    def start(self):
        """The section's empty part of the report, headed by its numbered title."""
        from lmstudy.report.render import Section

        return Section(self.name, self.heading)

    def build(self, results: Path, figures: Path):
        """Its part of the report (lmstudy.report.render.Section): headed by its title, then the
        sentence `empty` where load() found nothing to show, else the blocks body() adds."""
        from lmstudy.report.render import Text

        section = self.start()
        data = self.load(results) if self.load else self.read(results, next(iter(self.products)))
        if (self.nothing or _frame_is_empty)(data):
            return section.add(Text(self.empty))
        self.body(section, data, results, figures)
        return section

    def opening(self, section, frame: pd.DataFrame, *texts: str, notes=(), answers=None, findings=None):
        """Add the blocks every section opens with, in this order: its method `texts`, what this run
        did not measure of the study's grid (its `coverage` keys, read from `frame`), what it did not
        record (the columns its load() found absent: coverage.with_columns), `notes`, its
        answers to the course's questions and its findings (each left out where None)."""
        from lmstudy.report import coverage
        from lmstudy.report.answers import Answers
        from lmstudy.report.render import Findings, Text

        for text in texts:
            section.add(Text(text))
        if self.coverage and (left := coverage.not_measured_in(self.name, frame, *self.coverage)):
            section.add(Text(left))
        if absent := coverage.not_recorded(frame):
            section.add(Text(absent))
        for note in notes:
            section.add(Text(note))
        if answers is not None:
            section.add(Answers(answers))
        if findings is not None:
            section.add(Findings(findings))
        return section

    def prose(self, paragraph: str, **values) -> str:
        """One paragraph of its method template, lmstudy/sections/<name>/method.j2: the macro
        `paragraph` called with `values`, its lines joined by single spaces (a template wraps freely)."""
        return words(self.name, "method.j2", paragraph, **values)

    def read(self, results: Path, product: str) -> pd.DataFrame:
        """One of its CSV products of run `results`; empty where the run has none."""
        return result_files.read_csv(results / self.products[product], missing_ok=True)

    def draw(self, results: Path, out_dir: Path) -> None:
        """Its figures into out_dir, which exists afterwards even where there is nothing to draw."""
        out_dir.mkdir(parents=True, exist_ok=True)
        if self.make_figures is not None:
            self.make_figures(results, out_dir)

    @property
    def drawn_by(self) -> str:
        """The dotted name a figure of this section credits when it names no function of its own."""
        function = self.make_figures
        return f"{function.__module__}.{function.__qualname__}" if function else ""
