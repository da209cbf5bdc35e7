"""Benchmarking and profiling study of a Transformer language model.

Importing the package (or its config helpers) must not import torch: the
Snakefile imports it at parse time, on submit hosts without a GPU.
"""
