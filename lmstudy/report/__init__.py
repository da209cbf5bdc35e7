"""The report: its sections (tables, figures, findings) and their rendering.

- ``contract``: what a section declares once (SectionContract), which the report and
  the comparison are generic over;
- ``render``: the report's building blocks (Section, Table, Figure, ...) and
  rendering to HTML and Markdown;
- ``sections``: one package per study section, and the registry of them (NAMES);
- ``compare``: the report comparing two runs, and ``compare_cells`` what its sections share.

No torch (tests/test_import_graph.py). Importing this package itself imports nothing.
"""
