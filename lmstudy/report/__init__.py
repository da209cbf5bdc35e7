"""The report: its sections (tables, figures, findings) and their rendering.

- ``render``: the report's building blocks (Section, Table, Figure, ...) and
  rendering to HTML and Markdown;
- ``sections``: one module per study section;
- ``compare``: the report comparing two runs.

No torch (tests/test_layout.py). Importing this package itself imports nothing.
"""
