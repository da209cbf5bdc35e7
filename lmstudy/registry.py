"""The sections (NAMES) and their measuring jobs, gathered from the sections themselves.

A section declares what it measures in its package's ``jobs.py``
(lmstudy/sections/<name>/jobs.py: ``JOBS``, name -> Job) and the files its jobs
and its aggregation write in ``products.py`` (``PRODUCTS``, gathered by
lmstudy.products). The workflow builds each job's spec here (lmstudy.job_spec),
``lmstudy measure <job>`` finds the job's runner here. So a new section is its
package, its name in NAMES, its rule file, its config block and its schema:
nothing else lists it.

Torch-free and pandas-free, as is every jobs.py: the Snakefile imports this at
parse time. A job's runner is named, not imported, so that only the job that
runs it imports the measuring code.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable

# The registry of sections, in the report's order: the study's report shows, the comparison
# compares, the workflow includes (workflow/rules/<name>.smk, from the Snakefile) and the tests
# check exactly these. Each is a package lmstudy/sections/<name>/. A plain list of names here,
# below the sections (which import this module), so that reading it reaches no section's code.
NAMES = (
    "timing",
    "nsys",
    "precision",
    "memory",
    "attention",
    "compile",
    "ladder",
    "comm",
    "ddp",
    "sharding",
    "cost",
)


def numbered(name: str, title: str) -> str:
    """`title` numbered by section `name`'s place in the registry: "1. End-to-end timing"."""
    return f"{NAMES.index(name) + 1}. {title}"


def reference(name: str) -> str:
    """How a sentence names section `name`, by its place in the registry: "section 5"."""
    return f"section {NAMES.index(name) + 1}"


@dataclasses.dataclass(frozen=True)
class Job:
    """One kind of measuring job: how the workflow builds its spec and what runs it."""

    # The rule's wildcards the spec depends on, in the order the spec builder reads them.
    wildcards: tuple[str, ...]
    # (config, {wildcard: value}) -> the job's complete spec, a JSON object (lmstudy.job_spec).
    spec: Callable[[dict, dict], dict]
    # "module:function" that measures a complete spec: function(spec, paths) -> its PhaseClock or
    # None (lmstudy.command); named, so that only the job that runs it imports the measuring code.
    runner: str
    # The paths the job writes or reads (command-line options --<name>), each with its help;
    # a name ending in "?" is optional.
    paths: tuple[tuple[str, str], ...] = (("out", "CSV of result rows"),)
    # Its measuring processes are forked from the job's process, which must leave CUDA alone.
    forks: bool = True
    # A user's model's code is imported once, in a model's process its measuring processes are forked
    # from (lmstudy.measure.model_process); not where they are spawned (fresh interpreters that import
    # it themselves: the distributed sections' ranks), where it would be imported for nothing.
    model_process: bool = True
    # It may run torch.compile, whose compile time is measured: a compile cache of its own.
    compiles: bool = False
    # The section it belongs to, filled in by the registry.
    section: str = ""

    @property
    def runner_module(self) -> str:
        return self.runner.partition(":")[0]

    def load_runner(self) -> Callable:
        """The runner function (importing its module, a section's jobs.py: torch-free until it runs)."""
        module, _, function = self.runner.partition(":")
        return getattr(importlib.import_module(module), function)


def _section_module(name: str):
    """lmstudy/sections/<name>/jobs.py, or None for a section that declares nothing there."""
    try:
        return importlib.import_module(f"lmstudy.sections.{name}.jobs")
    except ModuleNotFoundError as error:
        if error.name == f"lmstudy.sections.{name}.jobs":
            return None
        raise


@functools.cache
def jobs() -> dict[str, Job]:
    """Every section's jobs, by job name, in the registry's order."""
    found: dict[str, Job] = {}
    for name in NAMES:
        module = _section_module(name)
        for job_name, job in getattr(module, "JOBS", {}).items():
            if job_name in found:
                twice = f"{found[job_name].section} and {name}"
                raise ValueError(f"job {job_name!r} is declared by two sections, {twice}")
            found[job_name] = dataclasses.replace(job, section=name)
    return found


def job(name: str) -> Job:
    """The job `name`, or a ValueError naming the jobs there are."""
    try:
        return jobs()[name]
    except KeyError:
        raise ValueError(f"no measuring job named {name!r}: the jobs are {', '.join(jobs())}") from None
