"""On any CPU: nsys exports, snapshots, tables, statistics, comparisons.

pandas and numpy, never torch (tests/test_import_graph.py checks every import,
function-local ones included): these modules run in the jobs after the
measurements, on nodes where torch may not even be installed.
"""
