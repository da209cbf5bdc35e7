"""Import each of many modules as if in a fresh interpreter, cheaply: one process, one fork per module.

A module that imports only after another one has (an import cycle entered
from the wrong side) or that loads torch on its own is found only by importing
it first in its own process. Starting an interpreter per module costs a second
or more each (pandas, matplotlib); forking one that has already imported the
third-party libraries costs milliseconds and keeps that property: no lmstudy
module is loaded before the fork, and torch is not unless asked for.

Run as `python -m tests.fresh_imports [--with-torch] MODULE...`; prints one
JSON object: module -> {"error": text or null, "torch": whether torch got loaded}.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Loaded before forking, for speed only: what the modules import from outside lmstudy.
THIRD_PARTY = ("numpy", "pandas", "matplotlib", "matplotlib.pyplot", "jinja2", "yaml", "scipy.stats")


def _import_in_a_child(module: str) -> dict:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: import, report, exit without running the parent's cleanup
        os.close(read)
        try:
            importlib.import_module(module)
            error = None
        except BaseException:  # noqa: BLE001 - any failure to import is the answer
            error = traceback.format_exc(limit=-3)
        with os.fdopen(write, "w") as out:
            json.dump({"error": error, "torch": "torch" in sys.modules}, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else {"error": "the child died without an answer", "torch": None}


def import_each(modules: list[str], with_torch: bool = False) -> dict[str, dict]:
    """Each module imported in a process of its own (see the module's doc)."""
    argv = [sys.executable, "-m", "tests.fresh_imports", *(["--with-torch"] if with_torch else []), *modules]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(done.stdout)


def main(argv: list[str]) -> None:
    with_torch = "--with-torch" in argv
    modules = [a for a in argv if a != "--with-torch"]
    for name in THIRD_PARTY + (("torch",) if with_torch else ()):
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a speed-up only: the child imports it where a module needs it
    preloaded = sorted(m for m in sys.modules if m == "lmstudy" or m.startswith("lmstudy."))
    if preloaded or ("torch" in sys.modules) != with_torch:
        sys.exit(f"the parent must not have loaded lmstudy {preloaded} or, unasked, torch")
    print(json.dumps({module: _import_in_a_child(module) for module in modules}))


if __name__ == "__main__":
    main(sys.argv[1:])
