"""The library's layout holds: every lmstudy import resolves, and the layers keep their rules.

Some imports happen only inside functions on GPU-only paths, which no CPU test
executes; this walks the source with the ast module instead, so a stale module
or name after a move fails here, not on the GPU node. Layers (README, Layout):
lmstudy/measure never imports lmstudy.report; that lmstudy/analyse and
lmstudy/report never import torch is tests/test_import_graph.py's.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

from .conftest import REPO
from .fresh_imports import import_each

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
    """(where, module, name or None) of every lmstudy import in the sources and the tests."""
    for path in SOURCES + TESTS:
        for line, module, name in _imports(path):
            if module == "lmstudy" or module.startswith("lmstudy."):
                yield f"{path.relative_to(REPO)}:{line}", module, name


def test_the_walk_sees_the_package():
    names = {_module_name(p) for p in SOURCES}
    assert {"lmstudy.measure.timing", "lmstudy.analyse.nsys.events", "lmstudy.report.render"} <= names
    assert len(list(_lmstudy_imports())) > 100


def _missing_here(module: str) -> str | None:
    """Why `module` is not a module of this checkout (None if it is): an editable install of
    another checkout would otherwise answer for a module that no longer exists here."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return f"no module {module}"
    origin = Path(spec.origin or next(iter(spec.submodule_search_locations)))
    return None if origin.resolve().is_relative_to(REPO.resolve()) else f"{module} found only at {origin}"


def _unresolved(module: str, name: str | None) -> str | None:
    """Why `from module import name` (or `import module`) fails in this checkout (None if it works)."""
    missing = _missing_here(module)
    if missing or name is None or name == "*":
        return missing
    imported = importlib.import_module(module)
    if hasattr(imported, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None:
        return _missing_here(f"{module}.{name}")  # a submodule: `from lmstudy.analyse import result_files`
    return None if hasattr(imported, name) else f"{module} has no {name}"


def test_every_lmstudy_import_resolves():
    """Every lmstudy import of the sources, scripts, tools and tests names a module and a name that
    exist, function-local imports on GPU-only paths included (no CPU test runs those)."""
    checked: dict[tuple[str, str | None], str | None] = {}  # many files import the same names
    failures = []
    for where, module, name in _lmstudy_imports():
        if (module, name) not in checked:
            checked[(module, name)] = _unresolved(module, name)
        if checked[(module, name)]:
            failures.append(f"{where}: {checked[(module, name)]}")
    assert not failures, "\n".join(failures)


def _package_modules() -> list[str]:
    return sorted(name for name in map(_module_name, SOURCES) if name)


def test_every_module_imports_first_in_a_fresh_process():
    """Each module imports on its own, not only after others have (an import cycle entered from the
    wrong side fails only then). Torch is loaded beforehand, for speed: whether a module loads it is
    tests/test_import_graph.py's question."""
    modules = _package_modules()
    assert {"lmstudy.measure.timing", "lmstudy.analyse.stats", "lmstudy.launch.gpu_lease"} <= set(modules)
    answers = import_each(modules, with_torch=True)
    failed = {module: answer["error"] for module, answer in answers.items() if answer["error"]}
    assert not failed, "\n".join(f"{module}:\n{error}" for module, error in failed.items())
    assert set(answers) == set(modules)


def _files_under(folder: str) -> list[Path]:
    return [p for p in SOURCES if p.relative_to(REPO).parts[:2] == ("lmstudy", folder)]


def test_measure_never_imports_the_report_or_a_section():
    files = _files_under("measure")
    assert files
    offending = [
        f"{p.relative_to(REPO)}:{line}: {module}"
        for p in files
        for line, module, name in _imports(p)
        if module.startswith(("lmstudy.report", "lmstudy.sections"))
        or (module == "lmstudy" and name in ("report", "sections"))
    ]
    assert not offending, f"lmstudy/measure imports the report or a section: {offending}"


def test_no_module_is_left_at_an_old_path():
    old = [
        "report.py", "nsys", "memory", "compare", "model.py", "timing.py", "steps.py",
        "tables.py", "result_files.py", "computed.py", "stats.py", "spec.py", "devices.py",
    ]
    left = [name for name in old if (REPO / "lmstudy" / name).exists()]
    assert not left, f"left at the top of lmstudy/: {left}"


def test_no_function_in_lmstudy_is_over_60_lines():
    """Issue 41: a function a maintainer reads at once. Sentences live in the sections' templates, the
    code choosing numbers and cases; a longer function is split into named steps."""
    long = []
    for path in sorted((REPO / "lmstudy").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "functions over 60 lines: " + "; ".join(long)
