"""The registry of report sections (lmstudy.sections.NAMES) is the one list of sections: every
section package and rule file is in it, and each contract is consistent with its package."""

from __future__ import annotations

import pytest

from lmstudy.registry import NAMES
from lmstudy.report.compare import compared_products
from lmstudy.sections.contracts import contract, contracts

from .conftest import REPO

SECTIONS = REPO / "lmstudy" / "sections"
RULES = REPO / "workflow" / "rules"
NOT_SECTIONS = {"common", "report", "compare"}  # rule files of the workflow itself


def test_every_section_package_and_rule_file_is_registered_and_nothing_else():
    packages = {p.parent.name for p in SECTIONS.glob("*/__init__.py")}
    rule_files = {p.stem for p in RULES.glob("*.smk")} - NOT_SECTIONS
    assert packages == set(NAMES)
    assert rule_files == set(NAMES)


def test_the_snakefile_includes_the_rule_files_from_the_registry():
    snakefile = (REPO / "Snakefile").read_text()
    assert "for section_name in SECTION_NAMES:" in snakefile
    assert not any(f'rules/{name}.smk"' in snakefile for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_contract_names_its_package_and_is_numbered_in_the_reports_order(name):
    section = contract(name)
    assert section.name == name
    # The number comes from the registry, never written by hand: a section added or moved renumbers all.
    assert not section.title[0].isdigit()
    assert section.start().title == f"{NAMES.index(name) + 1}. {section.title}"
    assert section.measures.endswith(".")
    assert section.products, "a section reads at least one product"


@pytest.mark.parametrize("name", NAMES)
def test_a_contract_declares_what_its_package_computes(name):
    section = contract(name)
    assert all(callable(f) for f in section.tables)
    assert section.findings, "a section states at least one finding"
    unmarked = [f.__qualname__ for f in section.findings if not getattr(f, "finds", False)]
    assert not unmarked, f"findings not marked @finds (so their data is not traced): {unmarked}"
    assert all(figure.endswith(".png") for figure in section.figures)
    if section.compare is not None:
        assert set(section.compare.reads) <= set(section.products)
        # The comparison's sentences carry the rows of A and B behind them, as the section's own do.
        assert section.compare.findings, "a comparison states at least one finding"
        unmarked = [f.__qualname__ for f in section.compare.findings if not getattr(f, "finds", False)]
        assert not unmarked, f"comparison findings not marked @finds: {unmarked}"
    if section.figures:
        assert section.drawn_by == f"lmstudy.sections.{name}.section.make_figures"


def test_the_comparison_reads_each_product_under_one_name():
    products = compared_products(contracts())
    assert products["timing"] == "timing/timing.csv"
    declared = {}
    for section in contracts():
        for key, path in section.products.items():
            assert declared.setdefault(key, path) == path, f"{key} names two products"
    assert set(products) <= set(declared)


def test_an_unknown_section_is_named():
    with pytest.raises(ValueError, match="no report section named 'timings'"):
        contracts(["timing", "timings"])
