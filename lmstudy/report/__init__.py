"""The report: rendering only, generic over sections (which live in lmstudy.sections).

- ``contract``: what a section declares once (SectionContract), which the report and
  the comparison are generic over;
- ``render``: the report's building blocks (Section, Table, Figure, ...) and
  rendering to HTML and Markdown, of the contracts it is handed;
- ``labels``: column labels and size order, shared by the sections;
- ``compare``: the report comparing two runs, and ``compare_cells`` what its sections share.

Never imports a section (tests/test_import_graph.py) nor torch. Importing this package
itself imports nothing.
"""
