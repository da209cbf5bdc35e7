"""The precision section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.products import Product

PRODUCTS = (
    Product(
        "precision/accumulation.csv",
        "precision_experiments",
        # The one experiment (lmstudy.measure.precision.accumulation) writes every column in every row,
        # whatever the model, device or preset: each is part of what it found.
        required=("method", "increment", "steps", "accumulator_dtype", "increment_dtype",
                  "increment_as_stored", "result", "exact", "abs_error", "rel_error"),
        numeric=("increment", "steps", "result", "exact", "abs_error", "rel_error"),
    ),
    Product("precision/toy_dtypes.csv", "precision_experiments", required=("precision", "tensor", "dtype")),
    Product(
        "precision/model_dtypes.csv",
        "precision_experiments",
        required=("model", "size", "precision", "tensor", "dtype"),
        numeric=("context_length", "depth"),
    ),
    Product(
        "precision/norm_errors_*.csv",
        "precision_norms",
        # The error and the tokens it is over (how many of them lost): the measurement, in every row
        # (lmstudy.measure.norm_precision); the input's RMS and largest value describe it, read where present.
        required=("size", "norm", "precision", "scale", "low_precision_op", "error_mean", "nonfinite_tokens",
                  "tokens"),
        numeric=("scale", "error_mean", "error_max", "nonfinite_tokens", "tokens", "input_rms"),
    ),
)
