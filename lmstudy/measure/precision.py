"""Section 3: mixed precision, observed at run time.

- `accumulation`: add 0.01 a thousand times in four ways (fp32 into fp32,
  fp16 into fp16, fp16 into an fp32 accumulator, fp16 upcast then added) and
  report each result, its dtype and its error.
- `toy_model_dtypes`: a toy model (Linear -> ReLU -> LayerNorm -> Linear)
  under fp16 and bf16 autocast; the dtypes of its parameters, each layer's
  output (forward hooks), the logits, the loss and the gradients, as
  observed. Where the device does not support an autocast dtype, the rows
  say "not run" and why.
- `model_dtypes`: the same for the study's model (config model:, any
  nn.Module its factory builds) at one size and context: `autocast_dtypes`,
  which both call, observes any model.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lmstudy.measure.model import ModelConfig
from lmstudy.model_choice import ModelChoice

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


def _dtype_of(value) -> str:
    """The dtype of a module's output: a tensor's, else the first tensor in a tuple, list, dict or an
    object of outputs (a Hugging Face ModelOutput); "(no tensor)" where it holds none."""
    if isinstance(value, torch.Tensor):
        return _dtype_name(value.dtype)
    if isinstance(value, dict):
        value = list(value.values())
    elif not isinstance(value, (tuple, list)) and hasattr(value, "__dict__"):
        value = list(vars(value).values())
    if isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, torch.Tensor):
                return _dtype_name(item.dtype)
    return "(no tensor)"


def hooked_modules(model: nn.Module, depth: int) -> list[tuple[str, nn.Module]]:
    """The modules whose outputs are observed: every one whose path has at most `depth` names, as
    model.range_depth counts (layers.0.attn is depth 3; depth 1: the model's children), the model
    itself aside (its output is the logits)."""
    return [(name, module) for name, module in model.named_modules() if name and name.count(".") < depth]


def autocast_dtypes(
    model: nn.Module,
    forward: Callable[[nn.Module], torch.Tensor],
    loss_of: Callable[[torch.Tensor], torch.Tensor],
    device: torch.device,
    precision: str,
    depth: int = 1,
    loss_note: str = "cross_entropy inside autocast",
) -> list[dict]:
    """The dtypes of any model's tensors under `precision` autocast, as observed at run time.

    `forward(model)` returns the logits, `loss_of(logits)` the loss; both run inside autocast and
    the loss's backward after it. Rows, in this order: each parameter as stored, each module's output
    down to `depth` (forward hooks, in call order: a module called twice gives two rows), the
    logits, the loss, and each parameter's gradient. Where the device does not support the
    autocast dtype, one row says "not run" and why.
    """
    dtype = AUTOCAST_DTYPES[precision]
    reason = _autocast_support(device, dtype)
    if reason:
        return [{"precision": precision, "tensor": "(all)", "dtype": "not run", "note": reason}]
    rows = []

    def note(tensor_name: str, dtype_name: str, kind: str) -> None:
        rows.append({"precision": precision, "tensor": tensor_name, "dtype": dtype_name, "note": kind})

    for name, param in model.named_parameters():
        note(f"parameter {name}", _dtype_name(param.dtype), "as stored")
    hooks = [
        module.register_forward_hook(
            lambda m, i, out, name=name: note(f"output of {name} ({type(m).__name__})", _dtype_of(out),
                                              "forward hook")
        )
        for name, module in hooked_modules(model, depth)
    ]
    try:
        with torch.autocast(device_type=device.type, dtype=dtype):
            logits = forward(model)
            note("logits", _dtype_name(logits.dtype), "model output")
            loss = loss_of(logits)
            note("loss", _dtype_name(loss.dtype), loss_note)
    finally:
        for hook in hooks:
            hook.remove()
    loss.backward()
    for name, param in model.named_parameters():
        if param.grad is None:
            note(f"gradient of {name}", "(none)", "no gradient after backward")
        else:
            note(f"gradient of {name}", _dtype_name(param.grad.dtype), "after backward")
    return rows


def toy_model_dtypes(
    device: torch.device, precision: str, batch: int = 8, in_features: int = 16, out_features: int = 4
) -> list[dict]:
    """The dtypes of the toy model's tensors under `precision` autocast, as observed."""
    torch.manual_seed(0)
    model = ToyModel(in_features, out_features).to(device)
    x = torch.randn(batch, in_features, device=device)
    target = torch.randint(out_features, (batch,), device=device)
    return autocast_dtypes(model, lambda m: m(x), lambda logits: F.cross_entropy(logits, target), device,
                           precision, depth=1)


# Module outputs down to this depth at most: with repeated blocks shown once in the report
# (layers.* for layers.0, layers.1, ...), depth 3 reaches inside a block of the built-in model
# (layers.*.ln1, .attn, .ln2, .ffn) and of a Hugging Face one (model.layers.*.self_attn, ...).
MAX_DEPTH = 3
# The batch of the model's observation by default (the job's is config batch_size): dtypes do not
# depend on it.
MODEL_BATCH = 2


def dtype_depth(range_depth: int) -> int:
    """The depth of the modules whose outputs are observed: config model.range_depth, at most
    MAX_DEPTH; MAX_DEPTH where it is 0 (no ranges: the built-in model's default)."""
    return min(range_depth, MAX_DEPTH) if range_depth > 0 else MAX_DEPTH


def model_dtypes(
    choice: ModelChoice, config: ModelConfig, device: torch.device, precision: str, batch: int = MODEL_BATCH
) -> list[dict]:
    """The dtypes of the study's model (config model:, the built-in one by default) under `precision`
    autocast, built by its factory with `config`'s dimensions and context, on a random batch: its
    parameters, its modules' outputs down to dtype_depth(choice.range_depth), the logits, the
    study's loss (cross-entropy on the logits upcast to fp32) and the gradients.

    A model too large for the device gives one row "not run" (out of memory).
    """
    from lmstudy.measure.devices import is_out_of_memory
    from lmstudy.measure.model import cross_entropy
    from lmstudy.measure.steps import build_workload

    try:
        work = build_workload(config, batch, precision, device, with_optimizer=False, choice=choice)
        return autocast_dtypes(
            work.model,
            lambda _: work.logits(),
            lambda logits: cross_entropy(logits, work.targets),
            device,
            precision,
            depth=dtype_depth(choice.range_depth),
            loss_note="the study's loss inside autocast (cross-entropy on fp32 logits)",
        )
    except Exception as error:  # noqa: BLE001 - out of memory is a result; anything else is raised
        if not is_out_of_memory(error):
            raise
        return [{"precision": precision, "tensor": "(all)", "dtype": "not run", "note": "out of memory"}]


def run_all(device: torch.device) -> tuple[list[dict], list[dict]]:
    toy = [row for p in AUTOCAST_DTYPES for row in toy_model_dtypes(device, p)]
    return accumulation(device), toy


def run_model(
    choice: ModelChoice, config: ModelConfig, device: torch.device, batch: int = MODEL_BATCH
) -> list[dict]:
    """model_dtypes under every autocast dtype."""
    return [row for p in AUTOCAST_DTYPES for row in model_dtypes(choice, config, device, p, batch)]
