"""The library's import graph, read from the sources (ast, function-local imports included):
no cycles, the launcher (lmstudy.launch) stands apart, and the analysing side never imports torch.

The launcher starts and places jobs before their Python imports anything, so
it is stdlib-only; what a job learns from it reaches the job as data (the
variables of lmstudy.job_process), so nothing in lmstudy reaches the
launcher, and editing it reruns no job (tests/test_code_version.py).
"""

from __future__ import annotations

import ast
import graphlib
import sys
from pathlib import Path

import pytest

from .conftest import REPO

PACKAGE = REPO / "lmstudy"
LAUNCH = "lmstudy.launch"
# The one module outside the launcher that it imports: the names of what it tells the job.
SHARED_WITH_THE_LAUNCHER = {"lmstudy.job_process"}


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _nodes(tree: ast.AST, in_functions: bool):
    """The nodes of `tree`; with in_functions False, only those that run when the module is imported."""
    for node in ast.iter_child_nodes(tree):
        if in_functions or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield node
            yield from _nodes(node, in_functions)


def _imports(module: str, in_functions: bool = True) -> set[str]:
    """Every module `module` imports (with in_functions False, on its own import): an lmstudy module
    by its full name, any other by its top name."""
    path = MODULES[module]
    found = set()
    for node in _nodes(ast.parse(path.read_text(), filename=str(path)), in_functions):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            # `from lmstudy.a import b` imports the module lmstudy.a.b where there is one.
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {name if name in MODULES else name.split(".")[0] for name in found}


GRAPH = {module: _imports(module) for module in MODULES}
# What importing each module runs: lmstudy.environment, say, imports torch only inside describe().
ON_IMPORT = {module: _imports(module, in_functions=False) for module in MODULES}


def _ours(names: set[str]) -> set[str]:
    return {name for name in names if name in MODULES}


def _reached(module: str, graph=GRAPH) -> set[str]:
    """The lmstudy modules `module` imports, directly or through others."""
    seen, todo = set(), [module]
    while todo:
        for name in _ours(graph[todo.pop()]) - seen:
            seen.add(name)
            todo.append(name)
    return seen


def _runners(module: str) -> bool:
    """A section's jobs.py (lmstudy/sections/<name>/jobs.py)."""
    return module.startswith("lmstudy.sections.") and module.endswith(".jobs")


def _in_launch(module: str) -> bool:
    return module == LAUNCH or module.startswith(LAUNCH + ".")


def test_the_graph_sees_the_package():
    assert {"lmstudy.environment", "lmstudy.launch.gpu_lease", "lmstudy.report.render"} <= set(GRAPH)
    assert "lmstudy.job_process" in GRAPH["lmstudy.launch.gpu_lease"]
    assert "torch" in GRAPH["lmstudy.measure.timing"]
    assert "torch" in GRAPH["lmstudy.environment"] and "torch" not in ON_IMPORT["lmstudy.environment"]


def test_no_import_cycles():
    sorter = graphlib.TopologicalSorter({module: _ours(names) for module, names in GRAPH.items()})
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")


@pytest.mark.parametrize("module", sorted(filter(_in_launch, GRAPH)) + sorted(SHARED_WITH_THE_LAUNCHER))
def test_the_launcher_imports_only_the_stdlib_and_itself(module):
    outside = {
        name for name in GRAPH[module]
        if not (_in_launch(name) or name in SHARED_WITH_THE_LAUNCHER or name in sys.stdlib_module_names)
    }
    if module in SHARED_WITH_THE_LAUNCHER:  # below the launcher: it imports nothing of lmstudy either
        outside |= _ours(GRAPH[module])
    assert not outside, f"{module} imports {sorted(outside)}"


def test_nothing_in_the_library_reaches_the_launcher():
    # Provenance, the analysing side and the report above all; the measuring side too (the scripts
    # hand a job to the launcher, never the library).
    offending = {m: sorted(filter(_in_launch, _reached(m))) for m in GRAPH if not _in_launch(m)}
    offending = {m: reached for m, reached in offending.items() if reached}
    assert not offending, f"these reach lmstudy.launch: {offending}"


# The floors of the package folders, from the ground up: a module imports only from its own folder's
# floor or below (measuring reuses the analysis's statistics; the sections use the report's contract
# and labels; the report renders whatever contracts it is handed and never imports a section; the
# CPU side's commands, python -m lmstudy <command>, hand the sections' contracts to the report).
FLOORS = ("lmstudy.analyse", "lmstudy.measure", "lmstudy.report", "lmstudy.sections", "lmstudy.commands")


def _floor(module: str) -> int | None:
    return next((i for i, f in enumerate(FLOORS) if module == f or module.startswith(f + ".")), None)


def test_no_import_points_up_a_floor():
    upward = {
        module: sorted(name for name in _ours(names) if (_floor(name) or -1) > _floor(module))
        for module, names in GRAPH.items()
        if _floor(module) is not None
    }
    upward = {module: names for module, names in upward.items() if names}
    assert not upward, f"these import from a floor above their own: {upward}"
    # The modules beside the folders (the registry, products, the spec builders) are below every
    # section: they find the sections by name, never by a plain import.
    below = {m: sorted(n for n in _ours(GRAPH[m]) if _floor(n) == 3) for m in GRAPH if _floor(m) is None}
    below = {m: names for m, names in below.items() if names and not _in_launch(m)}
    assert not below, f"these import a section: {below}"
    assert {"lmstudy.environment", "lmstudy.analyse.study_cost", "lmstudy.report.compare"} <= set(GRAPH)


def test_the_analysing_side_never_imports_torch():
    """The jobs after the measurements (aggregation, figures, cost, report, comparison) run on CPU
    nodes, where torch may not be installed, and loading it costs seconds a job: lmstudy/analyse
    and lmstudy/report never import torch, not even inside a function (a GPU-only path no CPU test
    runs), nor through a module they import (lmstudy.environment imports it only in describe(),
    which they never call). tests/test_cpu_side_imports.py checks the same of the workflow's real
    CPU-side jobs, as they run."""
    analysing = [m for m in GRAPH if m.startswith(("lmstudy.analyse", "lmstudy.report", "lmstudy.sections"))]
    assert len(analysing) > 90
    # A section's jobs.py is its measuring side's declaration (lmstudy.registry): its runners, which
    # only `lmstudy measure <job>` calls, may reach the device; importing it may not (below).
    in_own_code = sorted(module for module in analysing if "torch" in GRAPH[module] and not _runners(module))
    assert not in_own_code, f"these import torch (at the top or in a function): {in_own_code}"
    offending = {
        module: sorted(via for via in _reached(module, ON_IMPORT) if "torch" in ON_IMPORT[via])
        for module in analysing
    }
    offending = {m: via for m, via in offending.items() if via}
    assert not offending, f"these import torch through the modules named: {offending}"
