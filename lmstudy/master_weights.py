"""bf16 matrix weights kept up to date by the optimizer, beside fp32 master weights.

Under bf16 autocast with fp32 weights, every matrix product casts its fp32
weight to bf16 on each use, and the backward casts the weight's bf16
gradient back to fp32: two passes over the weights per step that do no
arithmetic. Here each Linear's weight is a bf16 parameter, the optimizer
keeps an fp32 master copy of it, updates the master with AdamW exactly as
torch.optim.AdamW would, and writes the bf16 weight from it in the same
kernel. Autocast then finds the weight in bf16 already and casts nothing.

The values are those of plain bf16 autocast: the bf16 weight is the master
rounded to bf16, which is what autocast's cast produced; the gradient
reaching the master is the bf16 gradient widened to fp32, which is what the
cast's backward produced. Embedding and RMSNorm weights stay fp32
parameters (they are not matrix-product operands), updated in place.
"""

from __future__ import annotations

import torch
from torch import nn

from lmstudy.model import Linear


def _adamw_update(copies, grads, masters, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay):
    """torch.optim.AdamW's update (its single-tensor form) of each master, then its bf16 copy (None: none)."""
    step += 1
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = (1 - beta2**step).sqrt()
    for copy, grad, master, exp_avg, exp_avg_sq in zip(copies, grads, masters, exp_avgs, exp_avg_sqs,
                                                       strict=True):
        grad = grad.float()
        master.mul_(1 - lr * weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        master.sub_(exp_avg / denom * (lr / bias_correction1))
        if copy is not None:
            copy.copy_(master)


class MasterWeightAdamW:
    """AdamW over fp32 masters of a model whose Linear weights it turns into bf16 parameters.

    `compiled`: the whole update is one torch.compile'd function, so each
    weight's read of gradient, master and moments, and its writes, are one
    fused kernel. The hyperparameters are lmstudy.model.make_optimizer's.
    """

    def __init__(self, model: nn.Module, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 compiled: bool = True) -> None:
        for module in model.modules():
            if isinstance(module, Linear):
                master = module.weight.detach()
                module.weight = nn.Parameter(master.to(torch.bfloat16))
                module.weight.master = master
        self.params = [p for p in model.parameters() if p.requires_grad]
        # An fp32 parameter is its own master.
        self.masters = [getattr(p, "master", p) for p in self.params]
        self.copies = [p if hasattr(p, "master") else None for p in self.params]
        self.exp_avgs = [torch.zeros_like(m) for m in self.masters]
        self.exp_avg_sqs = [torch.zeros_like(m) for m in self.masters]
        device = self.masters[0].device
        # A tensor, so the compiled update is not specialised on (and recompiled for) each step number.
        self.step_count = torch.zeros((), dtype=torch.float32, device=device)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.state: dict = {}  # what callers clear after an out-of-memory step; nothing is kept there
        self._update = torch.compile(_adamw_update) if compiled else _adamw_update

    def step(self) -> None:
        with torch.no_grad():
            index = [i for i, p in enumerate(self.params) if p.grad is not None]
            self._update(
                [self.copies[i] for i in index], [self.params[i].grad for i in index],
                [self.masters[i] for i in index],
                [self.exp_avgs[i] for i in index], [self.exp_avg_sqs[i] for i in index],
                self.step_count, self.lr, self.betas[0], self.betas[1], self.eps, self.weight_decay,
            )

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None
