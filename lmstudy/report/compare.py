"""The comparison report of two runs: every registered section that declares how two of its runs
compare (lmstudy.report.contract.Comparison), in the report's order, under one header.

report/compare/<A>_vs_<B>/index.html and report.md, with tables/*.csv and
figures/*.png beside them. Reads only results/<A>/ and results/<B>/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lmstudy.analyse.compare import runs as R
from lmstudy.atomic import write_csv
from lmstudy.report.compare_cells import compiled_rule, verdict_rule
from lmstudy.report.contract import ComparedRuns, words
from lmstudy.report.render import Section, render


def compared_products(contracts: list) -> dict[str, str]:
    """Every product the comparison of two runs reads, by key, in the contracts' order."""
    products = {}
    for section in contracts:
        if section.compare is not None:
            products.update({key: section.products[key] for key in section.compare.reads})
    return products


def build(
    contracts: list, results: Path, a_name: str, b_name: str, figures: Path, min_effect: float, noise=None
) -> tuple[list[Section], dict]:
    """The comparison's sections (of `contracts`, lmstudy.sections.contracts, those that declare
    how two runs compare) and its header (environments, differences, warnings)."""
    products = compared_products(contracts)
    a, b = R.load(results, a_name, products), R.load(results, b_name, products)
    figures.mkdir(parents=True, exist_ok=True)
    runs = ComparedRuns(a, b, min_effect, figures, noise=noise)
    sections = [contract.compare.build(runs) for contract in contracts if contract.compare is not None]
    header = {
        "a": a_name,
        "b": b_name,
        "environments": R.environment_table(a, b),
        "warnings": R.warnings(a, b),
        "min_effect": min_effect,
        "gpu_min_effect": runs.noise.gpu_min_effect,
        "verdict_rule": verdict_rule(min_effect, runs.noise.gpu_min_effect) + " "
        + compiled_rule(runs.noise.compiled_agreement),
    }
    return sections, header


def render_comparison(
    contracts: list,
    results: Path,
    a_name: str,
    b_name: str,
    templates: Path,
    out_dir: Path,
    min_effect: float,
    noise=None,
) -> None:
    """Write out_dir/index.html, report.md, tables/*.csv and figures/*.png."""
    for stale in ("tables", "figures"):
        shutil.rmtree(out_dir / stale, ignore_errors=True)
    work = out_dir / ".figures"
    shutil.rmtree(work, ignore_errors=True)
    sections, header = build(contracts, results, a_name, b_name, work, min_effect, noise)
    header["environment_table"] = header.pop("environments")
    render(
        sections,
        {},
        templates,
        out_dir,
        words("report", "compare.j2", "title", a=a_name, b=b_name),
        f"{a_name}_vs_{b_name}",
        template="compare",
        **header,
    )
    shutil.rmtree(work, ignore_errors=True)
    tables_dir = out_dir / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    write_csv(tables_dir / "environments.csv", header["environment_table"])
    # Each table's own CSV (tables/<section>_<caption>.csv) is written by render(), which names it.
