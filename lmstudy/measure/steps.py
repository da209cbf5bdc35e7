"""One step of each measured pass, marked with the ranges profilers read.

A pass is what one timed step does:
- ``forward``: inference, a forward pass under ``torch.no_grad``;
- ``forward_backward``: forward, loss and backward;
- ``train_step``: forward, loss, backward and an AdamW step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from lmstudy.measure.factory import build_model, check_differentiable, check_not_meta, forward_logits
from lmstudy.measure.markers import annotate
from lmstudy.measure.model import ModelConfig, cross_entropy, make_optimizer
from lmstudy.model_choice import ModelChoice

BUILTIN = ModelChoice()
PASSES = ("forward", "forward_backward", "train_step")
# fp16 autocast times the speed only: no GradScaler (its cost, one unscale and inf check of the
# gradients per step, is the optimizer's; the loss here never needs scaling to be timed).
PRECISIONS = ("fp32", "bf16", "fp16")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def import_lazy_modules() -> None:
    """Import now what a build imports on first use: AdamW's constructor loads torch._dynamo.

    That costs seconds, once per process, and is an import, not part of a
    build or a cold start. Called before the phase clock starts, and in the
    parent of forked measuring processes, which then inherit the modules.
    Touches no device and computes nothing (torch.empty only allocates).
    """
    make_optimizer(torch.nn.ParameterList([torch.nn.Parameter(torch.empty(1))]))


def autocast_context(precision: str, device: torch.device):
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision in AUTOCAST_DTYPES:
        return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])
    raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")


@dataclass
class Workload:
    """A model on its device with one fixed random batch."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer | None
    inputs: torch.Tensor
    targets: torch.Tensor
    precision: str
    vocab_size: int
    choice: ModelChoice = ModelChoice()

    def logits(self) -> torch.Tensor:
        """The model's logits for the batch, whatever form its forward returns them in (checked)."""
        return forward_logits(self.model, self.inputs, self.vocab_size, self.choice.factory)

    @property
    def device(self) -> torch.device:
        return self.inputs.device

    def drop_training_state(self) -> None:
        """Free the gradients and the optimizer's state, as after an out-of-memory step."""
        self.model.zero_grad(set_to_none=True)
        if self.optimizer is not None:
            self.optimizer.state.clear()


def build_workload(
    config: ModelConfig,
    batch_size: int,
    precision: str,
    device: torch.device,
    with_optimizer: bool = True,
    seed: int = 0,
    choice: ModelChoice = BUILTIN,
) -> Workload:
    """`config` gives the dimensions and attention; `choice` the factory that builds the model from them."""
    torch.manual_seed(seed)
    dims = {"vocab_size": config.vocab_size, "d_model": config.d_model, "d_ff": config.d_ff,
            "num_layers": config.num_layers, "num_heads": config.num_heads}
    # Built on the device directly: initialising a 2.7B model on the host
    # first would cost tens of seconds per job.
    with torch.device(device):
        model = build_model(choice, dims, config.context_length, config.attention)
    if device.type != "meta":
        check_not_meta(model, choice.factory)
    # The batch comes from a host generator, the same on every device; the
    # explicit device keeps it there under a surrounding torch.device context.
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch_size, config.context_length)
    inputs = torch.randint(config.vocab_size, shape, generator=generator, device="cpu").to(device)
    targets = torch.randint(config.vocab_size, shape, generator=generator, device="cpu").to(device)
    # A model without trainable parameters has no optimizer (AdamW refuses an empty list); its forward
    # pass is measured, and its backward passes stop naming why (factory.check_differentiable).
    trainable = any(p.requires_grad for p in model.parameters())
    optimizer = make_optimizer(model) if with_optimizer and trainable else None
    return Workload(model, optimizer, inputs, targets, precision, config.vocab_size, choice)


def make_step(work: Workload, pass_name: str) -> Callable[[], torch.Tensor | None]:
    """Return a function that runs one step of `pass_name` (not synchronized).

    The backward passes' function returns the step's loss (a device tensor).
    """
    model, optimizer = work.model, work.optimizer

    def forward() -> None:
        with annotate("step"), torch.no_grad(), annotate("forward"):
            with autocast_context(work.precision, work.device):
                work.logits()

    def forward_backward(update: bool = False) -> torch.Tensor:
        with annotate("step"):
            model.zero_grad(set_to_none=True)
            with annotate("forward"), autocast_context(work.precision, work.device):
                loss = cross_entropy(work.logits(), work.targets)
            check_differentiable(loss, model, work.choice.factory)
            with annotate("backward"):
                loss.backward()
            if update:
                with annotate("optimizer"):
                    optimizer.step()
        return loss

    if pass_name == "forward":
        return forward
    if pass_name == "forward_backward":
        return forward_backward
    if pass_name == "train_step":
        if optimizer is None and any(p.requires_grad for p in model.parameters()):
            raise ValueError("train_step needs a workload built with an optimizer")
        return lambda: forward_backward(update=True)
    raise ValueError(f"pass must be one of {PASSES}, not {pass_name!r}")

