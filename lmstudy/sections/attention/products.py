"""The attention section's result files: what its jobs and its aggregation write, checked when read
back (lmstudy.analyse.result_files). Apart from its jobs, so that editing a check reruns the rules
that read the files and no measurement. Torch- and pandas-free."""

from __future__ import annotations

from lmstudy.products import Product

_ATTENTION = dict(
    # Every row, whatever ran (lmstudy.measure.attention.run_sweep): the configuration and its prediction.
    required=("implementation", "precision", "head_dim", "seq_len", "status", "batch_size", "steps", "warmup",
              "predicted_saved_bytes", "predicted_before_backward_bytes", "predicted_peak_bytes"),
    numeric=("batch_size", "head_dim", "seq_len", "forward_median_ms", "backward_median_ms", "peak_bytes"),
    job=("implementation", "precision", "head_dim"),
    grid=("seq_len",),
)

PRODUCTS = (
    Product("attention/raw/*.csv", "attention_sweep", **_ATTENTION),
    Product("attention/attention.csv", "aggregate_attention", **_ATTENTION),
)
