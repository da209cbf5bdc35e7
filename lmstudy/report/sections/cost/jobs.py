"""The cost section's result files (lmstudy.registry): it measures nothing itself. Pandas-free."""

from __future__ import annotations

from lmstudy.phases import PHASES
from lmstudy.products import Product

PRODUCTS = (
    Product("benchmarks/*/*/*.phases.json", "measuring", required=("phases",)),
    Product(
        "cost/jobs.csv",
        "study_cost",
        required=("section", "rule", "job", "wall_s", "measuring"),
        numeric=(
            "wall_s", *(f"{phase}_s" for phase in PHASES), "other_s", "waited_s", "started_at", "ended_at",
        ),
    ),
)
