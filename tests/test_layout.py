"""The library's layout holds: every lmstudy import resolves, and the layers keep their rules.

Some imports happen only inside functions on GPU-only paths, which no CPU test
executes; this walks the source with the ast module instead, so a stale module
or name after a move fails here, not on the GPU node. Layers (README, Layout):
lmstudy/analyse and lmstudy/report never import torch, at module level or in
a function; lmstudy/measure never imports lmstudy.report.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from .conftest import REPO

SOURCES = sorted(
    path for folder in ("lmstudy", "scripts", "tools") for path in (REPO / folder).rglob("*.py")
)
# The tests' own imports are checked too (not the layer rules).
TESTS = sorted((REPO / "tests").glob("*.py"))


def _module_name(path: Path) -> str | None:
    """The dotted name of a file of the package (None outside it)."""
    rel = path.relative_to(REPO)
    if rel.parts[0] != "lmstudy":
        return None
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every import in `path`, function-local ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the file's own package
                own = _module_name(path)
                if own is None:  # the tests' `from .conftest import ...`
                    continue
                package = own.split(".")
                if path.name != "__init__.py":
                    package.pop()
                package = package[: len(package) - (node.level - 1)]
                module = ".".join(package + ([module] if module else []))
            found += [(node.lineno, module, alias.name) for alias in node.names]
    return found


def _lmstudy_imports():
    for path in SOURCES + TESTS:
        for line, module, name in _imports(path):
            if module == "lmstudy" or module.startswith("lmstudy."):
                yield pytest.param(path, line, module, name, id=f"{path.relative_to(REPO)}:{line}:{module}")


def test_the_walk_sees_the_package():
    names = {_module_name(p) for p in SOURCES}
    assert {"lmstudy.measure.timing", "lmstudy.analyse.nsys.events", "lmstudy.report.render"} <= names
    assert len(list(_lmstudy_imports())) > 100


def _assert_here(module: str, where: str) -> None:
    """`module` exists in this checkout: an editable install of another checkout would
    otherwise answer for a module that no longer exists here."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{where}: no module {module}"
    origin = Path(spec.origin or next(iter(spec.submodule_search_locations)))
    assert origin.resolve().is_relative_to(REPO.resolve()), f"{where}: {module} found only at {origin}"


@pytest.mark.parametrize(("path", "line", "module", "name"), list(_lmstudy_imports()))
def test_every_lmstudy_import_resolves(path, line, module, name):
    where = f"{path.relative_to(REPO)}:{line}"
    _assert_here(module, where)
    if name is None or name == "*":
        return
    imported = importlib.import_module(module)
    if hasattr(imported, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None:
        _assert_here(f"{module}.{name}", where)
        return  # a submodule: `from lmstudy.analyse import result_files`
    assert hasattr(imported, name), f"{where}: {module} has no {name}"


def _files_under(folder: str) -> list[Path]:
    return [p for p in SOURCES if p.relative_to(REPO).parts[:2] == ("lmstudy", folder)]


@pytest.mark.parametrize("layer", ["analyse", "report"])
def test_analyse_and_report_never_import_torch(layer):
    files = _files_under(layer)
    assert files
    offending = [
        f"{p.relative_to(REPO)}:{line}: {module}"
        for p in files
        for line, module, _ in _imports(p)
        if module == "torch" or module.startswith("torch.")
    ]
    assert not offending, f"lmstudy/{layer} imports torch: {offending}"


def test_measure_never_imports_the_report():
    files = _files_under("measure")
    assert files
    offending = [
        f"{p.relative_to(REPO)}:{line}: {module}"
        for p in files
        for line, module, name in _imports(p)
        if module == "lmstudy.report" or module.startswith("lmstudy.report.")
        or (module == "lmstudy" and name == "report")
    ]
    assert not offending, f"lmstudy/measure imports the report: {offending}"


def test_no_module_is_left_at_an_old_path():
    old = [
        "report.py", "sections", "nsys", "memory", "compare", "model.py", "timing.py", "steps.py",
        "tables.py", "result_files.py", "computed.py", "stats.py", "spec.py", "devices.py",
    ]
    left = [name for name in old if (REPO / "lmstudy" / name).exists()]
    assert not left, f"left at the top of lmstudy/: {left}"
