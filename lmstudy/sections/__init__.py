"""The study's sections: one package each, in the registry's order (lmstudy.registry.NAMES).

A section is a package lmstudy/sections/<name>/ that holds all of it, from what it
measures to what the report says of it:

- ``__init__.py``: a docstring only, so that importing ``jobs.py`` imports nothing else;
- ``jobs.py``: what it measures (lmstudy.registry): its jobs (the spec each is given,
  the runner ``lmstudy measure <job>`` calls); torch- and pandas-free, read by the
  workflow at parse time; a runner imports lmstudy.measure when it runs;
- ``products.py``: the result files its jobs and its aggregation write, checked when
  read back (lmstudy.products, lmstudy.analyse.result_files): apart from the jobs, so
  that editing a check reruns the rules that read the files and no measurement;
- ``section.py``: loads its products, draws (``make_figures``) and builds its part
  of the report, and declares the contract (``SECTION = SectionContract(...)``,
  lmstudy.report.contract); ``method.j2``: its method paragraphs;
- ``tables.py``: the functions that compute its tables (pandas only);
- ``figures.py``: the functions that draw its figures (matplotlib; the only part that
  imports it), with ``plots.py`` here shared by all;
- ``findings.py`` and ``answers.py``: its findings and its answers to the course's
  questions, computed from its tables;
- ``compare.py``: its part of the comparison of two runs (where it has one).

``contracts.py`` finds a section's contract by name. The floors, from the ground up:
measure and analyse, then report (the contract, rendering, labels), then the
sections, which use both; report/ never imports a section: whoever renders hands it
the contracts. tables.py, findings.py and answers.py never import figures.py.
docs/layout.md shows how to add a section, on an example.
"""
