"""The report's sections: one package each, registered here; labels.py and plots.py are shared by all.

NAMES is the registry, in the report's order (lmstudy.report.contracts imports
each section's contract; lmstudy.registry gathers each section's jobs): the study's report shows, the
comparison compares, the workflow includes (workflow/rules/<name>.smk, from the
Snakefile) and the tests check exactly these sections. It stays a plain list
of names so that the workflow reads it at parse time without importing pandas
or matplotlib.

A section is a package lmstudy/report/sections/<name>/ whose ``section.py`` ends
with ``SECTION = SectionContract(...)`` (lmstudy.report.contract): its title,
what it measures, the products it reads, its tables, figures, findings and
answers, how to build its part of the report and how two runs of it compare.
Inside the package, one module per job:

- ``__init__.py``: a docstring only, so that importing ``jobs.py`` imports nothing else;
- ``jobs.py``: what it measures (lmstudy.registry): its jobs (the spec each is given,
  the runner ``lmstudy measure <job>`` calls) and the result files they and its
  aggregation write; torch- and pandas-free, read by the workflow at parse time;
- ``section.py``: loads its products, draws (``make_figures``) and builds its part
  of the report, and declares the contract; ``method.j2``: its method paragraphs;
- ``tables.py``: the functions that compute its tables (pandas only);
- ``figures.py``: the functions that draw its figures (matplotlib; the only part that
  imports it);
- ``findings.py`` and ``answers.py``: its findings and its answers to the course's
  questions, computed from its tables;
- ``compare.py``: its part of the comparison of two runs (where it has one).

tables.py, findings.py and answers.py never import figures.py. Only jobs.py's runners touch a GPU,
through lmstudy.measure, imported when the job runs.
docs/layout.md shows how to add a section, on an example.
"""

from __future__ import annotations

NAMES = ("timing", "nsys", "precision", "memory", "attention", "compile", "ladder", "cost")


def numbered(name: str, title: str) -> str:
    """`title` numbered by section `name`'s place in the registry: "1. End-to-end timing"."""
    return f"{NAMES.index(name) + 1}. {title}"
