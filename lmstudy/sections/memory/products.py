"""The memory section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.products import Product

PRODUCTS = (
    Product(
        "memory/memory.csv",
        "memory_table",
        required=("size", "context_length", "pass", "precision", "status"),
        numeric=("context_length", "peak_bytes", "max_memory_allocated", "allocated_at_start_bytes"),
    ),
    Product(
        "memory/summary/*/timeline.csv",
        "memory_summary",
        required=("index", "time_ms", "action", "size_bytes", "allocated_bytes", "phase"),
        numeric=("index", "time_ms", "size_bytes", "allocated_bytes"),
    ),
    Product(
        "memory/summary/*/largest_allocations.csv",
        "memory_summary",
        required=("size_bytes", "count", "total_bytes"),
        numeric=("size_bytes", "requested_bytes", "count", "total_bytes"),
        may_be_empty=True,
    ),
    Product("memory/summary/*/kinds.csv", "memory_summary", required=("kind", "bytes"), numeric=("bytes",)),
    Product(
        "memory/summary/*/summary.json",
        "memory_summary",
        required=("snapshot", "peak_bytes", "peak_phase", "kinds_at_peak", "allocated_at_start_bytes"),
    ),
)
