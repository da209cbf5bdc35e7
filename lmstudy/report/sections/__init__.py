"""One package per report section; labels.py and plots.py are shared by all.

Each section is a package lmstudy/report/sections/<name>/ with one module per job:

- ``__init__.py``: the loader(s) of its aggregated tables and the two entry points below
  (``build`` assembles the Section from the parts);
- ``tables.py``: the functions that compute its tables (pandas only);
- ``figures.py``: the functions that draw its figures (matplotlib; the only part that
  imports it; precision draws none, so has none);
- ``findings.py``: the functions that compute its findings (sentences) from its tables.

tables.py and findings.py never import figures.py. Each section package offers two
functions that the report side calls:

- ``make_figures(results: Path, out_dir: Path) -> None`` draws the section's
  figures (PNG) from its aggregated tables under ``results`` into ``out_dir``;
- ``build(results: Path, figures: Path) -> lmstudy.report.render.Section`` returns
  the section's tables, figures and computed findings.

``results`` is ``results/<run>``. Neither function touches a GPU.
"""
