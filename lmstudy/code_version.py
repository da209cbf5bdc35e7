"""The version of the code a job runs, so that editing it reruns the job's results and nothing else.

Snakemake reruns a job whose code changed only for code inside the rule
(run: blocks, scripts:); this workflow's rules call `python -m lmstudy <command>`
(lmstudy/commands/<name>.py), which import the library. So each rule takes as a param a digest of
its command's module and of every lmstudy module that imports, directly or through others
(found by reading the sources, never by importing them: parse time imports no
torch). A measuring rule's script imports lmstudy.measure, so an edit there
reruns the measurements; an aggregating or report rule's imports the analysis
and the report, so an edit there reruns only tables, figures and the report.

The digest is of each module's compiled code without docstrings or line
numbers, so an edit to a comment, a docstring, blank lines or layout reruns nothing.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "lmstudy"

@functools.cache
def _module_file(name: str) -> Path | None:
    """The source of lmstudy module `name` (a package: its __init__.py), or None if there is none."""
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _with_packages(name: str) -> list[str]:
    """`name` and the packages above it, which importing it runs too."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


class UnfollowedImport(ValueError):
    """An import of a computed name that the code version cannot read: it would hide what reruns."""


@functools.cache
def _all_modules() -> tuple[str, ...]:
    """Every module of the package, dotted (a package by its own name)."""
    names = (".".join(f.relative_to(ROOT).with_suffix("").parts) for f in (ROOT / PACKAGE).rglob("*.py"))
    return tuple(sorted(name.removesuffix(".__init__") for name in names))


def _module_name(path: Path) -> str | None:
    """The dotted name of the lmstudy module at `path`, or None for a file outside the package."""
    if not path.is_relative_to(ROOT / PACKAGE):
        return None
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _pattern(node) -> re.Pattern | None:
    """The module names an import_module/__import__ argument may be: a string, or an f-string whose
    computed parts each stand for one name; None for anything else (a variable, a call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.compile(re.escape(node.value))
    if isinstance(node, ast.JoinedStr):
        parts = [re.escape(v.value) if isinstance(v, ast.Constant) else r"\w+" for v in node.values]
        return re.compile("".join(parts))
    return None


def imports_in(text: str, module: str | None, where: str = "<source>") -> frozenset[str]:
    """The lmstudy modules a source imports, however the import is spelled: `import lmstudy.a.b as c`,
    `from lmstudy.a import b` (module lmstudy.a.b where that is a module, else a name of lmstudy.a),
    relative imports (`from .b import c`, resolved from `module`, the source's dotted name), inside
    functions too, and import_module()/__import__() of a string or an f-string (each computed part
    one name: import_module(f"lmstudy.sections.{name}.jobs") stands for every section's jobs.py).
    An import_module() of any other argument raises UnfollowedImport: it could not be followed, and
    what reruns must not depend on how a name was built."""
    tree = ast.parse(text, where)
    package = module.rsplit(".", 1)[0] if module else None
    if module and where.endswith("__init__.py"):
        package = module
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if package is None:
                    continue
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and _called(node) in ("import_module", "__import__") and node.args:
            pattern = _pattern(node.args[0])
            if pattern is None:
                raise UnfollowedImport(
                    f"{where}:{node.lineno}: the code version cannot follow this {_called(node)}(): "
                    "spell the module as a string or an f-string (lmstudy.code_version)"
                )
            found |= {m for m in _all_modules() if pattern.fullmatch(m)}
    found = {name for name in found if name == PACKAGE or name.startswith(PACKAGE + ".")}
    return frozenset(m for name in found for m in _with_packages(name) if _module_file(m))


def _called(call: ast.Call) -> str | None:
    """The name a call is made by: import_module for importlib.import_module(...) and import_module(...)."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """The lmstudy modules the source at `path` imports, anywhere in it (imports_in)."""
    return imports_in(path.read_text(encoding="utf-8"), _module_name(path), str(path))


# The modules that build a job's spec from the config. A script imports them
# only to complete a spec given by hand; in the workflow the spec arrives
# complete, as a param that Snakemake compares itself, so what they compute
# reaches the job through that param and their code is not the job's code.
# (The registry also imports a job's runner by the name its Job gives, the one import of a
# computed name that imports_in cannot read; job_digest follows that name itself.)
SPEC_BUILDERS = frozenset({"lmstudy.config", "lmstudy.job_spec", "lmstudy.registry"})


@functools.cache
def modules_of(script: Path) -> tuple[Path, ...]:
    """The script and every lmstudy source it imports, directly or not (the spec builders' aside), sorted."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(_module_file(name) for name in _imports(path) if name not in SPEC_BUILDERS)
    return tuple(sorted(seen))


def _code_parts(code: types.CodeType, into: hashlib._Hash) -> None:
    """What a code object does: its instructions, names and constants, not its line numbers."""
    into.update(code.co_code)
    into.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_parts(const, into)
        else:
            into.update(_stable_repr(const).encode())


def _stable_repr(const) -> str:
    """repr of a constant, the same in every process: a set's order follows the hash seed of strings."""
    if isinstance(const, frozenset):
        return "frozenset({" + ", ".join(sorted(_stable_repr(c) for c in const)) + "})"
    if isinstance(const, tuple):
        return "(" + ", ".join(_stable_repr(c) for c in const) + ",)"
    return repr(const)


@functools.cache
def _code_digest(path: Path) -> str:
    """One source's code, without comments, docstrings or layout: compiled without docstrings
    (optimize=2, which also drops asserts: the library has none), read without line numbers."""
    code = compile(path.read_bytes(), str(path), "exec", optimize=2, dont_inherit=True)
    digest = hashlib.sha256()
    _code_parts(code, digest)
    return digest.hexdigest()


def digest(*scripts: str | Path) -> str:
    """A short digest of what the scripts run: their code and the library code they import."""
    total = hashlib.sha256()
    for script in scripts:
        for path in modules_of(Path(script).resolve()):
            label = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            total.update(f"{label}\0{_code_digest(path)}\0".encode())
    return total.hexdigest()[:16]


def job_digest(job: str, *scripts: str | Path) -> str:
    """digest() of a measuring job: `lmstudy measure`'s code, the job's runner's module (its section's
    jobs.py) and what they import, and the scripts it runs besides (nsys's profiled program)."""
    from lmstudy import registry

    runner = _module_file(registry.job(job).runner_module)
    return digest(ROOT / PACKAGE / "command.py", runner, *scripts)


def factory_digest(reference: str) -> str:
    """A short digest of the model factory's source (config model.factory) and the lmstudy modules it
    imports, so that editing the user's model reruns exactly the jobs that measured it.

    A factory whose file cannot be found has the digest "missing": its job says why it cannot run.
    """
    from lmstudy.model_choice import factory_file

    path = factory_file(reference)
    if path is None or not path.is_file():
        return "missing"
    path = path.resolve()
    total = hashlib.sha256(reference.encode())
    own = _own_modules(path, _own_folder(reference, path))
    for module in sorted({m for source in own for m in modules_of(source)}):
        label = module.relative_to(path.parent) if module.is_relative_to(path.parent) else module.name
        total.update(f"{label}\0{_code_digest(module)}\0".encode())
    return total.hexdigest()[:16]


def _own_folder(reference: str, path: Path) -> Path | None:
    """The folder whose modules are the factory's own: its top package's (mypkg.model:build), or the
    folder of a factory file or a lone module. None where that folder holds installed packages or
    the standard library, whose modules are not the user's to edit (nor to read, for their size)."""
    from lmstudy.model_choice import is_file_reference, split_reference

    where, _ = split_reference(reference)
    folder = path.parent
    if not is_file_reference(where):
        depth = where.count(".") + (path.name == "__init__.py")
        folder = path.parents[depth] / where.split(".")[0] if depth else folder
    installed = {"site-packages", "dist-packages"} & set(folder.parts)
    standard = any(folder == Path(p) for p in _standard_library())
    return None if installed or standard or not folder.is_dir() else folder


def _standard_library() -> list[str]:
    import sysconfig

    return [sysconfig.get_path(name) for name in ("stdlib", "platstdlib")]


def _own_modules(path: Path, folder: Path | None) -> set[Path]:
    """The factory's source and every module of `folder` it imports, directly or not (read with ast,
    never imported), so that editing a helper module of the user's model reruns what measured it."""
    import ast

    found, todo = set(), [path]
    while todo:
        source = todo.pop()
        if source in found:
            continue
        found.add(source)
        if folder is None:
            continue
        try:
            tree = ast.parse(source.read_bytes(), str(source))
        except (SyntaxError, ValueError):
            continue  # the job names a factory that cannot be imported
        for name in _imported_names(tree, source):
            todo.extend(m for m in _candidates(name, source, folder) if m not in found)
    return found


def _imported_names(tree, source: Path) -> set[str]:
    """Each module name an import statement in `tree` may mean (relative ones as dotted paths from
    the source's folder, written '.'-first), `from a import b` as both a and a.b."""
    import ast

    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names |= {f"{base}.{alias.name}" if node.module else base + alias.name for alias in node.names}
    return names


def _candidates(name: str, source: Path, folder: Path) -> list[Path]:
    """The files inside `folder` that module `name`, imported from `source`, may be."""
    level = len(name) - len(name.lstrip("."))
    parts = [p for p in name.lstrip(".").split(".") if p]
    if level > len(source.parents):
        return []
    bases = [source.parents[level - 1]] if level else [source.parent, folder.parent, folder]
    files = []
    for base in bases:
        target = base.joinpath(*parts)
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if candidate.is_file() and candidate.resolve().is_relative_to(folder):
                files.append(candidate.resolve())
    return files
