"""The report and the comparison of real GPU runs (issue 37): the built-in model (qb), a user's model
from a file (qe, an nn.TransformerEncoder language model) and a partial run of hf_factory:llama (ql),
all made on H200s at commit b9d9ffa (tests/fixtures/gpu-runs/README.md). A user's model, a CPU or a
preset records less than the built-in model on a GPU in the full study: every section says what was
not recorded instead of failing on a column it lacks.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse import result_files
from lmstudy.report import render
from lmstudy.report.labels import use_size_order
from lmstudy.sections.contracts import contracts

from .conftest import FIXTURES, REPO

RUNS = FIXTURES / "gpu-runs"
TEMPLATES = REPO / "workflow/templates"
SIZES = ["tiny", "small", "medium", "large", "xl", "2.7B"]


def _copy(run: str, results: Path) -> Path:
    return Path(shutil.copytree(RUNS / run, results / run))


def _tables(results: Path) -> list[Path]:
    """The aggregated tables whose provenance the header shows (the workflow's ENVIRONMENT_TABLES)."""
    return sorted(p for p in results.glob("*/*.csv"))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The three runs side by side under results/ (as they ran, at once on one node), each drawn and
    rendered into report/<run>/, and the comparisons qb vs qe and qb vs ql into report/compare/."""
    import matplotlib

    matplotlib.use("Agg")
    from lmstudy.report.compare import render_comparison

    root = tmp_path_factory.mktemp("gpu-runs")
    use_size_order(SIZES)
    for run in ("qb", "qe", "ql"):
        _copy(run, root / "results")
    for run in ("qb", "qe", "ql"):
        results = root / "results" / run
        if run == "qe":  # the figures of a user's model (the attention figures read a column it may lack)
            for contract in contracts():
                contract.draw(results, results / "figures" / contract.name)
        render.render_study(
            results, run, contracts(), TEMPLATES, root / "report" / run, "GPU run", _tables(results)
        )
    for a, b in (("qb", "qe"), ("qb", "ql")):
        render_comparison(
            contracts(), root / "results", a, b, TEMPLATES, root / f"report/compare/{a}_vs_{b}", 0.03
        )
    return root


def _report(root: Path, run: str) -> str:
    """Its Markdown, unescaped ("6\\. torch\\.compile" reads "6. torch.compile")."""
    return (root / "report" / run / "report.md").read_text().replace("\\", "")


def _section(text: str, heading: str) -> str:
    """The part of a Markdown report under the heading that ends with `heading`, to the next one."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## ") and line.endswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end])


def test_every_run_renders_every_section(rendered):
    for run in ("qb", "qe", "ql"):
        text = _report(rendered, run)
        for contract in contracts():
            assert f"## {contract.heading}" in text, (run, contract.name)
        assert (rendered / "report" / run / "index.html").stat().st_size > 0


def test_the_built_in_model_answers_the_residual_stream(rendered):
    memory = _section(_report(rendered, "qb"), "Memory")
    assert "memory_profiling (d)" in memory
    assert "batch × context × d_model × bytes per element for small (batch 4, d_model 768)" in memory
    assert "The size of one residual-stream activation" in memory  # its table


def test_a_users_model_says_it_recorded_no_residual_stream(rendered):
    """The failure the GPU run met: encoder-lm records no residual_stream_bytes (which of a user's modules
    carries the residual stream is not known); the answer says so and no empty table stands in for it."""
    memory = _section(_report(rendered, "qe"), "Memory")
    assert (
        "Not answered: encoder-lm is a model of your own, and the snapshot job does not know which of "
        "its modules carries the residual stream, so it recorded no residual-stream size."
    ) in memory
    assert "The size of one residual-stream activation" not in memory  # no empty table for it
    # Its other answers come from what it did record: peaks and the largest allocations, at its own lines.
    assert "encoder_lm.py:16 (forward)" in memory


def test_a_users_model_says_what_the_built_in_model_alone_runs(rendered):
    text = _report(rendered, "qe")
    ladder = _section(text, "The optimization ladder of the training step")
    assert "not applicable" in ladder and "encoder-lm: switching the attention to sdpa" in ladder
    precision = _section(text, "Mixed precision")
    assert "These are not the activations of the model this study measures (encoder-lm)" in precision


def test_a_partial_run_says_what_it_did_not_measure(rendered):
    """ql stopped after 26 of 49 jobs: two of its four memory snapshots and 2.7B's fp32 timing never ran."""
    text = _report(rendered, "ql")
    memory = _section(text, "Memory")
    assert "skipped" in memory
    assert "Not answered: llama is a model of your own" in memory


@pytest.mark.parametrize("b", ["qe", "ql"])
def test_the_comparison_of_the_built_in_model_with_a_users_renders(rendered, b):
    text = (rendered / "report" / "compare" / f"qb_vs_{b}" / "report.md").read_text().replace("\\", "")
    name = {"qe": "encoder-lm", "ql": "llama"}[b]
    assert f"| model | lmstudy built-in Transformer LM | {name} | differs |" in text
    for contract in contracts():
        if contract.compare is not None:
            assert f"## {contract.heading.split(' ', 1)[0]}" in text, contract.name


# Dropping each optional column in turn, from the complete run (the built-in model's, 49 of 49 jobs).


def _files() -> dict[str, list[str]]:
    """The files of the complete run the report reads, by the pattern of their product."""
    found: dict[str, list[str]] = {}
    for path in sorted((RUNS / "qb").rglob("*")):
        if path.suffix in (".csv", ".json"):
            pattern = result_files.product_of(path).pattern
            found.setdefault(pattern, []).append(str(path.relative_to(RUNS / "qb")))
    return found


FILES = _files()


def _columns(path: Path) -> list[str]:
    if path.suffix == ".json":
        return list(json.loads(path.read_text()))
    return list(pd.read_csv(path, nrows=0).columns)


def _readers(relative: str) -> list:
    """The sections whose contract names the product of the file at `relative` (under results/<run>/)."""
    return [
        c
        for c in contracts()
        if any(
            fnmatch.fnmatch(relative, p)
            or ("<snapshot>" in p and relative.startswith(p.split("<snapshot>")[0]))
            for p in c.products.values()
        )
    ]


def _drop(path: Path, column: str, original: bytes) -> None:
    if path.suffix == ".json":
        data = json.loads(original)
        data.pop(column, None)
        path.write_text(json.dumps(data, indent=2) + "\n")  # as every writer ends its file: with a newline
        return
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if column in frame:
        frame.drop(columns=column).to_csv(path, index=False)


@pytest.mark.parametrize("pattern", sorted(FILES))
def test_the_report_renders_without_each_optional_column(pattern, tmp_path):
    """Every column of the product not in its `required`, dropped in turn from every file of it: each
    section that reads the product builds and renders (in-process, as the report command does)."""
    results = _copy("qb", tmp_path / "results")
    use_size_order(SIZES)
    paths = [results / p for p in FILES[pattern]]
    product = result_files.product_of(paths[0])
    readers = _readers(FILES[pattern][0])
    assert readers, f"no section reads {pattern}"
    originals = {p: p.read_bytes() for p in paths}
    # A column of `measured` is one a row of status ok always holds: a file without it is refused as
    # damaged, with the way to redo it (tests/test_damaged_results.py), not rendered without it.
    kept = set(product.required) | set(product.measured)
    columns = list(dict.fromkeys(c for p in paths for c in _columns(p) if c not in kept))
    failed = []
    for column in columns:
        for path in paths:
            _drop(path, column, originals[path])
        try:
            sections = [c.build(results, results / "figures" / c.name) for c in readers]
            render.render(sections, {}, TEMPLATES, tmp_path / "report", "without " + column, "qb")
        except Exception as error:  # noqa: BLE001 - every column's failure named at once
            failed.append(f"{column}: {type(error).__name__}: {error}")
        for path, data in originals.items():
            path.write_bytes(data)
    assert not failed, f"{pattern} without one column fails to render:\n" + "\n".join(failed)
