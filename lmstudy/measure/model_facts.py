"""What a job's rows need to know of the model, found in a fresh process: the user's code runs only there.

A job's process forks the measuring processes, so it must never import or
call the user's factory (or transformers): either may start CUDA, after
which no forked child could use it (lmstudy.measure.fresh_process). The
parameter count, the FLOPs of each pass and whether the model allows the
job's attention are therefore asked of a counting child, forked like the
measuring ones, which builds the model on the meta device and exits before
the first measuring process starts. Its CUDA, if the user's code starts it,
dies with it. A model whose forward cannot run on the meta device (Hugging
Face's reads a value) is never built on the host for its count: its FLOPs
are left to the first measuring process, which counts them on the device
after its measurement (ModelFacts.on_device, with_counts).

The built-in model needs no child: its counts are formulas
(lmstudy.flops, equal to FlopCounterMode's) and it can switch its attention.
"""

from __future__ import annotations

import dataclasses

from lmstudy.measure.fresh_process import run_forked
from lmstudy.measure.spec import ModelSpec

PASSES = ("forward", "forward_backward", "train_step")
ON_DEVICE = "on the device (its forward cannot run on the meta device)"


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    parameters: int
    flops_per_step: dict[str, float]
    not_applicable: str | None
    counted_by: str
    # The FLOPs are to be counted on the device by a measuring process (the meta device cannot).
    on_device: bool = False
    # The parameters that take part in a matrix product (the N of 6N: no embedding, position, norm or bias).
    matmul_parameters: int | None = None

    def flops(self, pass_name: str) -> float:
        return self.flops_per_step[pass_name]

    def with_counts(self, counted: dict | None) -> ModelFacts:
        """These facts with the FLOPs a measuring process counted on the device (None: it could not)."""
        if not self.on_device:
            return self
        if counted is None:
            return dataclasses.replace(self, on_device=False, counted_by=f"not counted ({ON_DEVICE}, which "
                                       "did not fit the device)")
        flops = {p: float(counted[p]) if counted[p] is not None else float("nan") for p in PASSES}
        return dataclasses.replace(self, flops_per_step=flops, on_device=False,
                                   counted_by=f"FlopCounterMode {ON_DEVICE}",
                                   matmul_parameters=counted.get("matmul_parameters"))


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
    from lmstudy.measure.factory import CountOnDevice

    facts = {"parameters": None, "flops_per_step": {}, "not_applicable": spec.not_applicable(),
             "counted_by": spec.flops_counted_by}
    if not count:
        return facts
    try:
        facts["parameters"] = spec.parameter_count()
        if not facts["not_applicable"]:  # nothing is measured otherwise: no FLOPs to count
            facts["flops_per_step"] = {p: spec.flops_per_step(p) for p in PASSES}
            facts["matmul_parameters"] = spec.matmul_parameter_count()
    except CountOnDevice:
        facts["on_device"] = True
    except Exception as error:
        # A factory that allocates on the host whatever the device (too large for it): its rows
        # say OOM, with no count.
        if not is_out_of_memory(error):
            raise
        facts["counted_by"] = f"not counted ({type(error).__name__}: the model does not fit the host)"
    return facts
