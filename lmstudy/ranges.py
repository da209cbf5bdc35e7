"""The names of the ranges the measured code marks (lmstudy.measure.markers) and the analysis reads.

No torch here: the nsys and memory analyses run on CPU nodes and import
these names without the code that opens the ranges.
"""

from __future__ import annotations

# The NVTX domain of lmstudy's own ranges (Nsight Systems shows "lmstudy:forward").
NVTX_DOMAIN = "lmstudy"

STEP = "step"
# The phases of a training step, in order; a forward-only step has the first.
PHASES = ("forward", "backward", "optimizer")
# Inside naive attention (lmstudy.measure.model.scaled_dot_product_attention).
ATTENTION_SCORES = "computing attention scores"
SOFTMAX = "computing softmax"
FINAL_MATMUL = "final matmul"

# Around each pass's profiled steps, when one capture profiles several passes
# (section 2): the analysis splits the capture by these ranges, then drops them.
PROFILED_PASS = "profiled pass "


def profiled_pass_range(pass_name: str) -> str:
    return PROFILED_PASS + pass_name

# Around each module's forward, down to config model.range_depth (lmstudy.measure.module_ranges):
# "module layers.0.attn". The analysis finds module ranges by this prefix.
MODULE_RANGE = "module "


def module_range(path: str) -> str:
    return MODULE_RANGE + path
