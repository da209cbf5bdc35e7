"""A profiler range around each module's forward, named by the module's path, for any model.

Nsight Systems reads them as NVTX ranges and torch.profiler as
record_function, like the step's own ranges (lmstudy.measure.markers), so a
kernel is attributed to the innermost module that launched it, whatever the
model. Only modules down to `depth` dots in their path get one (the root
model has none: the "forward" range is its range), and only modules that are
called (a ModuleList is not).
"""

from __future__ import annotations

import contextlib

import nvtx
import torch
from torch import nn

from lmstudy.ranges import NVTX_DOMAIN, module_range


def module_depth(path: str) -> int:
    return len(path.split(".")) if path else 0


@contextlib.contextmanager
def module_ranges(model: nn.Module, depth: int):
    """Within the block, each called module whose path has at most `depth` parts opens a range."""
    handles = []
    open_ranges: list = []

    def enter(name):
        def hook(module, args):
            if torch.compiler.is_compiling():
                return
            nvtx.push_range(name, domain=NVTX_DOMAIN)
            record = torch.profiler.record_function(name)
            record.__enter__()
            open_ranges.append(record)

        return hook

    def leave(module, args, output):
        if torch.compiler.is_compiling() or not open_ranges:
            return
        open_ranges.pop().__exit__(None, None, None)
        nvtx.pop_range(domain=NVTX_DOMAIN)

    for path, module in model.named_modules():
        if 0 < module_depth(path) <= depth:
            handles.append(module.register_forward_pre_hook(enter(module_range(path))))
            handles.append(module.register_forward_hook(leave))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
