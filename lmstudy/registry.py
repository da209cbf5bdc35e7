"""The sections' measuring jobs and result files, gathered from the sections themselves.

A section declares what it measures next to what it reports: its package's
``jobs.py`` (lmstudy/report/sections/<name>/jobs.py) lists its jobs
(``JOBS``: name -> Job) and the files they and its aggregation write
(``PRODUCTS``). Everything that needs them asks here: the workflow builds each
job's spec (lmstudy.job_spec), ``lmstudy measure <job>`` finds the job's
runner, lmstudy.analyse.result_files checks each file read back. So a new
section is its package, its name in NAMES, its rule file, its config block and
its schema: nothing else lists it.

Torch-free and pandas-free, as is every jobs.py: the Snakefile imports this at
parse time. A job's runner is named, not imported, so that only the job that
runs it imports the measuring code.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable

from lmstudy.products import Product
from lmstudy.report.sections import NAMES

SECTIONS_PACKAGE = "lmstudy.report.sections"


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
    """lmstudy/report/sections/<name>/jobs.py, or None for a section that declares nothing there."""
    module = f"{SECTIONS_PACKAGE}.{name}.jobs"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name == module:
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


@functools.cache
def products() -> tuple[Product, ...]:
    """Every section's products, in the registry's order."""
    return tuple(p for name in NAMES for p in getattr(_section_module(name), "PRODUCTS", ()))
