"""Named ranges that both Nsight Systems (NVTX) and torch.profiler see."""

from __future__ import annotations

import contextlib

import nvtx
import torch

from lmstudy.ranges import NVTX_DOMAIN


@contextlib.contextmanager
def annotate(name: str):
    """Mark a region as an NVTX range and a torch.profiler record_function.

    NVTX is what nsys reads; record_function is what the portable
    torch.profiler backend reads. Both cost next to nothing without a tool.
    """
    if torch.compiler.is_compiling():
        # Inside a graph being compiled the markers would break it in two;
        # the compiled kernels carry no per-range names anyway.
        yield
        return
    with nvtx.annotate(name, domain=NVTX_DOMAIN), torch.profiler.record_function(name):
        yield
