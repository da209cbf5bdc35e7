"""One module per report section.

Each section module offers two functions that the report side calls:

- ``make_figures(results: Path, out_dir: Path) -> None`` draws the section's
  figures (PNG) from its aggregated tables under ``results`` into ``out_dir``;
- ``build(results: Path, figures: Path) -> lmstudy.report.render.Section`` returns
  the section's tables, figures and computed findings.

``results`` is ``results/<run>``. Neither function touches a GPU.
"""
