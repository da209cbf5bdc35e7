"""The cost section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

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
            "wall_s",
            *(f"{phase}_s" for phase in PHASES),
            "other_s",
            "waited_s",
            "started_at",
            "ended_at",
        ),
    ),
)
