"""Sections are named by the registry's order (lmstudy.registry.numbered, reference), never by a number
written into a string: reordering the sections renumbers every sentence that names one."""

from __future__ import annotations

import ast
import re

from lmstudy import registry

from .conftest import REPO

NUMBERED = re.compile(r"\bsection [0-9]", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def numbered_strings(source: str) -> list[int]:
    """The lines of `source`'s string constants (docstrings aside) that say "section N"."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            and NUMBERED.search(node.value)]


def test_no_string_a_user_reads_numbers_a_section():
    found = [f"{path.relative_to(REPO)}:{line}" for path in sorted((REPO / "lmstudy").rglob("*.py"))
             for line in numbered_strings(path.read_text())]
    templates = [*(REPO / "workflow" / "templates").glob("*.j2"), *(REPO / "lmstudy").rglob("*.j2")]
    found += [str(p.relative_to(REPO)) for p in templates if NUMBERED.search(p.read_text())]
    assert not found, f"a section named by a number written in: {found} (use lmstudy.registry.reference)"


def test_the_check_finds_one():
    source = '"""Section 5, a docstring."""\nx = "(section 5)"\ny = f"{a} section 2"\n'
    assert numbered_strings(source) == [2, 3]


def test_a_reference_follows_the_registry():
    assert registry.reference(registry.NAMES[0]) == "section 1"
    assert registry.reference("cost") == f"section {len(registry.NAMES)}"
