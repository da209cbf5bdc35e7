"""The digest of the code a job runs (lmstudy.code_version; issue 23, item 5): the dry-runs are in
tests/test_invalidation.py, these are the digest's own properties."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from lmstudy import code_version

from .conftest import REPO


def test_the_digest_is_the_same_in_every_process():
    # A set constant's order follows the hash seed of strings; the digest must not.
    program = "import sys; from lmstudy import code_version as c; " \
              "print(c.digest(sys.argv[1] + '/lmstudy/commands/render_report.py'))"
    seen = {
        subprocess.run([sys.executable, "-c", program, str(REPO)], capture_output=True, text=True,
                       check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }
    assert len(seen) == 1


def test_a_script_imports_what_its_library_imports_and_no_more():
    def modules(script: str) -> set[str]:
        return {p.relative_to(REPO).as_posix() for p in code_version.modules_of(REPO / script)}

    measuring = modules("lmstudy/sections/timing/jobs.py") | modules("lmstudy/command.py")
    assert "lmstudy/measure/timing.py" in measuring and "lmstudy/measure/__init__.py" in measuring
    # The section's report code is not a measuring job's code: only its package's (light) __init__.
    assert "lmstudy/sections/timing/jobs.py" in measuring
    assert not {m for m in measuring if m.startswith("lmstudy/report/")}
    assert {m for m in measuring if m.startswith("lmstudy/sections/")} == {"lmstudy/sections/timing/jobs.py"}
    # Nor are its result-file checks (products.py): the aggregation that runs them reads them.
    assert "lmstudy/sections/timing/products.py" in modules("lmstudy/commands/aggregate.py")
    # The spec builders reach a workflow job through its spec param, not as its code.
    assert not {"lmstudy/config.py", "lmstudy/job_spec.py", "lmstudy/registry.py"} & measuring
    report = modules("lmstudy/commands/render_report.py")
    # Sections are imported by a computed name (importlib): every one of them counts.
    assert "lmstudy/sections/timing/tables.py" in report and "lmstudy/measure/timing.py" not in report


def test_no_job_runs_the_launchers_code():
    # The wrappers (scripts/gpu_lease.py, run_script.py) start jobs; what a job's command imports
    # never reaches lmstudy/launch, so an edit there reruns nothing.
    wrappers = {"gpu_lease.py", "run_script.py"}
    scripts = [p for p in sorted((REPO / "scripts").glob("*.py")) if p.name not in wrappers]
    scripts += sorted((REPO / "lmstudy" / "commands").glob("[!_]*.py"))
    assert len(scripts) > 10
    reaching = {
        script.name: launcher
        for script in scripts
        if (launcher := [m for m in code_version.modules_of(script) if "lmstudy/launch/" in m.as_posix()])
    }
    assert not reaching
    wrapper = code_version.modules_of(REPO / "scripts/gpu_lease.py")
    assert any("lmstudy/launch/" in m.as_posix() for m in wrapper)


def test_comments_docstrings_and_layout_change_nothing_but_code_does(tmp_path):
    original = REPO / "lmstudy/flops.py"
    copy = tmp_path / "flops.py"
    shutil.copy(original, copy)
    before = code_version._code_digest(copy)
    text = original.read_text()
    body = text.split('"""', 2)[2]
    copy.write_text('"""Another docstring."""\n# a comment\n\n\n' + body + "\n\n# the end\n")
    code_version._code_digest.cache_clear()
    assert code_version._code_digest(copy) == before
    copy.write_text(text + "\nEXTRA = 1\n")
    code_version._code_digest.cache_clear()
    assert code_version._code_digest(copy) != before


def test_every_rule_that_runs_our_code_reruns_when_that_code_changes():
    """A rule whose command runs one of our scripts carries a code=code_version(...) param."""
    import re

    from .conftest import REPO

    missing = []
    for rules in sorted((REPO / "workflow/rules").glob("*.smk")):
        blocks = re.split(r"^(?=rule \w+:)", rules.read_text(), flags=re.M)[1:]
        for block in blocks:
            name = re.match(r"rule (\w+):", block).group(1)
            runs_ours = re.search(r'"\s*lmstudy(_gpu)? \w+', block)
            # model_code_version: a measuring job's code and the model factory's (issue 25)
            if runs_ours and not re.search(r"code=(model_|job_)?code_version\(", block):
                missing.append(f"{rules.name}: {name}")
    assert not missing, f"rules without a code param: {missing}"


# Issue 41: whether an import counts toward a code version does not depend on how it is spelled.
@pytest.mark.parametrize("source", [
    "import lmstudy.flops",
    "import lmstudy.flops as f",
    "import os, lmstudy.flops",
    "from lmstudy import flops",
    "from lmstudy import (\n    errors,\n    flops,\n)",
    "from lmstudy.flops import parameter_count",
    "from ..flops import parameter_count",  # relative, from lmstudy.analyse.x
    "from .. import flops",
    "def f():\n    import lmstudy.flops",
    "import importlib\nimportlib.import_module('lmstudy.flops')",
    "from importlib import import_module\nimport_module(\"lmstudy.flops\")",
    "__import__('lmstudy.flops')",
    "import importlib\nname = 'flops'\nimportlib.import_module(f'lmstudy.{name}')",
])
def test_an_import_counts_however_it_is_spelled(source):
    from lmstudy.code_version import imports_in

    assert "lmstudy.flops" in imports_in(source, "lmstudy.analyse.spelled"), source


def test_an_f_string_import_stands_for_every_module_it_may_name_and_no_other():
    from lmstudy.code_version import imports_in

    found = imports_in("import importlib\nimportlib.import_module(f'lmstudy.sections.{n}.products')", "x")
    assert {"lmstudy.sections.timing.products", "lmstudy.sections.memory.products"} <= found
    assert not {m for m in found if m.endswith((".jobs", ".section"))}


def test_an_import_of_a_name_built_elsewhere_is_refused_not_ignored():
    from lmstudy.code_version import UnfollowedImport, imports_in

    with pytest.raises(UnfollowedImport, match="spell the module"):
        imports_in("import importlib\nname = 'lmstudy.flops'\nimportlib.import_module(name)", "x")


def test_every_module_a_code_version_may_read_can_be_followed():
    """The registry loads a runner by the name its Job gives (a spec builder: job_digest follows it)."""
    from lmstudy.code_version import SPEC_BUILDERS, _imports, _module_file

    for path in [*(REPO / "lmstudy").rglob("*.py"), *(REPO / "scripts").glob("*.py")]:
        dotted = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        if dotted not in SPEC_BUILDERS:
            _imports(path)
    assert _module_file("lmstudy.registry") is not None
