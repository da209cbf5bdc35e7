"""One home for every default: config.yaml (and its schema). No command-line parser of the library or
of the workflow's programs gives a setting that config.yaml holds a default of its own, as
scripts/profile_model.py once did (--warmup-steps 2 where config.yaml says 5)."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from .conftest import REPO

# Benchmarks by hand: their own experiments, run by no rule, on settings of their own (each says so
# in its --help); the study's settings reach the study's jobs through their specs.
BY_HAND = {"bench_gpu_measures.py", "bench_harness.py", "bench_job_server.py", "bench_ladder.py",
           "bench_module_ranges.py", "bench_process_start.py", "matmul_reference.py"}


def _config_keys() -> set[str]:
    """The names of config.yaml's settings (its leaves: a block's name, such as nsys:, is none)."""
    keys: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(value, dict):
                    keys.add(str(key))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((REPO / "config.yaml").read_text()))
    return keys


def _dest(call: ast.Call) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == "dest" and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    longs = [a.value for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
    return longs[0][2:].replace("-", "_") if longs else None


def _defaults(path: Path) -> list[tuple[int, str]]:
    """(line, dest) of each add_argument of `path` with a default other than None."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        if default is None or (isinstance(default, ast.Constant) and default.value is None):
            continue
        dest = _dest(node)
        if dest:
            found.append((node.lineno, dest))
    return found


def _programs() -> list[Path]:
    return [*sorted((REPO / "lmstudy").rglob("*.py")),
            *(p for p in sorted((REPO / "scripts").glob("*.py")) if p.name not in BY_HAND)]


def test_no_parser_default_shadows_a_config_value():
    keys = _config_keys()
    assert {"warmup_steps", "profiled_steps", "batch_size", "device"} <= keys  # the check reads config
    shadows = [f"{path.relative_to(REPO)}:{line} --{dest.replace('_', '-')}"
               for path in _programs() for line, dest in _defaults(path) if dest in keys]
    assert not shadows, f"a parser default beside config.yaml's (take it from the spec or a param): {shadows}"


def test_the_check_finds_a_default_that_shadows_one(tmp_path):
    program = tmp_path / "old_profile_model.py"
    program.write_text('import argparse\np = argparse.ArgumentParser()\n'
                       'p.add_argument("--warmup-steps", type=int, default=2)\n'
                       'p.add_argument("--trace", default=None)\n')
    assert _defaults(program) == [(3, "warmup_steps")]


def test_the_benchmarks_by_hand_are_run_by_no_rule():
    rules = "".join(line.partition("#")[0] + "\n" for p in sorted((REPO / "workflow" / "rules").glob("*.smk"))
                    for line in p.read_text().splitlines())
    for name in BY_HAND:
        assert (REPO / "scripts" / name).is_file(), name
        assert f"scripts/{name}" not in rules and f"lmstudy_cpu {name.removesuffix('.py')}" not in rules
