"""What a job's rows need to know of the model, found in a fresh process: the user's code runs only there.

A job's process forks the measuring processes, so it must never import or
call the user's factory (or transformers): either may start CUDA, after
which no forked child could use it (lmstudy.measure.fresh_process). The
parameter count, the FLOPs of each pass and whether the model allows the
job's attention are therefore asked of a counting child, forked like the
measuring ones, which builds the model on the meta device (or the host) and
exits before the first measuring process starts. Its CUDA, if the user's
code starts it, dies with it.

The built-in model needs no child: its counts are formulas
(lmstudy.flops, equal to FlopCounterMode's) and it can switch its attention.
"""

from __future__ import annotations

import dataclasses

from lmstudy.measure.fresh_process import run_forked
from lmstudy.measure.spec import ModelSpec

PASSES = ("forward", "forward_backward", "train_step")


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    parameters: int
    flops_per_step: dict[str, float]
    not_applicable: str | None
    counted_by: str

    def flops(self, pass_name: str) -> float:
        return self.flops_per_step[pass_name]


def model_facts(spec: ModelSpec, count: bool = True) -> ModelFacts:
    """The parameters, FLOPs per pass and attention check of `spec`'s model (a child counts a user's);
    without `count`, the attention check alone (parameters None, no FLOPs)."""
    if spec.model.builtin:
        return ModelFacts(**_facts(spec, count))
    what = f"the counting process of {spec.model.label} ({spec.size} ctx {spec.context_length})"
    return ModelFacts(**run_forked(_facts, spec, count, what=what, with_fork_time=False))


def counted_here(spec: ModelSpec) -> ModelFacts:
    """model_facts counted in this process: for a measuring process, which may run the user's code
    (and must not fork a counting child: its CUDA may be started)."""
    return ModelFacts(**_facts(spec, True))


def _facts(spec: ModelSpec, count: bool) -> dict:
    from lmstudy.measure.devices import is_out_of_memory

    facts = {"parameters": None, "flops_per_step": {}, "not_applicable": spec.not_applicable(),
             "counted_by": spec.flops_counted_by}
    if not count:
        return facts
    try:
        facts["parameters"] = spec.parameter_count()
        if not facts["not_applicable"]:  # nothing is measured otherwise: no FLOPs to count
            facts["flops_per_step"] = {p: spec.flops_per_step(p) for p in PASSES}
    except Exception as error:
        # A model too large to count on the host (one that reads a value in its forward, so not on
        # the meta device) is too large to measure too: its rows say OOM, with no count.
        if not is_out_of_memory(error):
            raise
        facts["counted_by"] = f"not counted ({type(error).__name__}: the model does not fit the host)"
    return facts
