"""Section 3: mixed precision, observed at run time.

- `accumulation`: add 0.01 a thousand times in four ways (fp32 into fp32,
  fp16 into fp16, fp16 into an fp32 accumulator, fp16 upcast then added) and
  report each result, its dtype and its error.
- `toy_model_dtypes`: a toy model (Linear -> ReLU -> LayerNorm -> Linear)
  under fp16 and bf16 autocast; the dtypes of its parameters, each layer's
  output (forward hooks), the logits, the loss and the gradients, as
  observed. Where the device does not support an autocast dtype, the rows
  say "not run" and why.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

INCREMENT = 0.01
STEPS = 1000
AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

# name -> (accumulator dtype, increment dtype, upcast the increment first)
ACCUMULATIONS = {
    "fp32 into fp32": (torch.float32, torch.float32, False),
    "fp16 into fp16": (torch.float16, torch.float16, False),
    "fp16 into an fp32 accumulator": (torch.float32, torch.float16, False),
    "fp16 upcast to fp32, then added": (torch.float32, torch.float16, True),
}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def accumulation(device: torch.device, increment: float = INCREMENT, steps: int = STEPS) -> list[dict]:
    """One row per way of summing `increment` `steps` times."""
    exact = increment * steps
    rows = []
    for name, (acc_dtype, inc_dtype, upcast) in ACCUMULATIONS.items():
        total = torch.tensor(0.0, dtype=acc_dtype, device=device)
        for _ in range(steps):
            x = torch.tensor(increment, dtype=inc_dtype, device=device)
            total += x.to(torch.float32) if upcast else x
        value = float(total)
        stored = float(torch.tensor(increment, dtype=inc_dtype))
        rows.append(
            {
                "method": name,
                "increment": increment,
                "steps": steps,
                "accumulator_dtype": _dtype_name(total.dtype),
                "increment_dtype": _dtype_name(inc_dtype),
                "increment_as_stored": stored,
                "result": value,
                "exact": exact,
                "abs_error": abs(value - exact),
                "rel_error": abs(value - exact) / exact,
            }
        )
    return rows


class ToyModel(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 10, bias=False)
        self.ln = nn.LayerNorm(10)
        self.fc2 = nn.Linear(10, out_features, bias=False)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.fc1(x))
        x = self.ln(x)
        return self.fc2(x)


def _autocast_support(device: torch.device, dtype: torch.dtype) -> str:
    """'' when autocast to `dtype` runs on `device`, else why not."""
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        return "this GPU does not support bf16"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autocast(device_type=device.type, dtype=dtype):
                enabled = torch.is_autocast_enabled(device.type)
        except (RuntimeError, TypeError) as error:
            return str(error).splitlines()[0]
    if not enabled:
        said = "; ".join(str(w.message) for w in caught)
        return said or f"autocast to {_dtype_name(dtype)} is not enabled on {device.type}"
    return ""


def toy_model_dtypes(
    device: torch.device, precision: str, batch: int = 8, in_features: int = 16, out_features: int = 4
) -> list[dict]:
    """The dtypes of the toy model's tensors under `precision` autocast, as observed."""
    dtype = AUTOCAST_DTYPES[precision]
    reason = _autocast_support(device, dtype)
    if reason:
        return [{"precision": precision, "tensor": "(all)", "dtype": "not run", "note": reason}]
    torch.manual_seed(0)
    model = ToyModel(in_features, out_features).to(device)
    x = torch.randn(batch, in_features, device=device)
    target = torch.randint(out_features, (batch,), device=device)
    rows = []

    def note(tensor_name: str, value: torch.Tensor, kind: str) -> None:
        rows.append(
            {"precision": precision, "tensor": tensor_name, "dtype": _dtype_name(value.dtype), "note": kind}
        )

    for name, param in model.named_parameters():
        note(f"parameter {name}", param, "as stored")
    hooks = [
        module.register_forward_hook(
            lambda m, i, out, name=name: note(f"output of {name} ({type(m).__name__})", out, "forward hook")
        )
        for name, module in model.named_children()
    ]
    try:
        with torch.autocast(device_type=device.type, dtype=dtype):
            logits = model(x)
            note("logits", logits, "model output")
            loss = F.cross_entropy(logits, target)
            note("loss", loss, "cross_entropy inside autocast")
    finally:
        for hook in hooks:
            hook.remove()
    loss.backward()
    for name, param in model.named_parameters():
        note(f"gradient of {name}", param.grad, "after backward")
    return rows


def run_all(device: torch.device) -> tuple[list[dict], list[dict]]:
    toy = [row for p in AUTOCAST_DTYPES for row in toy_model_dtypes(device, p)]
    return accumulation(device), toy
