"""Building the measured model through its factory (config `model:`), and checking what it gives.

Every measuring code path builds the model here, the built-in one too (its
factory is lmstudy.measure.model.build). A factory that cannot be loaded,
fails, returns something other than a module, or whose model gives logits of
the wrong shape stops the job with one sentence naming the factory and what
was wrong: a UserError, which the scripts print as one line.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable

import torch
from torch import nn

from lmstudy.errors import UserError
from lmstudy.model_choice import FIX_FACTORY, ModelChoice, factory_file, is_file_reference, split_reference

# What a user's code may raise that is no Exception: left alone, the job would exit 0 without its
# outputs (sys.exit(0)) or as if interrupted. Caught where the user's code runs, and named.
STOPS = (SystemExit, KeyboardInterrupt)


def _stopped(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"it called sys.exit({error.code!r}) (SystemExit)"
    return "it raised KeyboardInterrupt"


class NotApplicable(Exception):
    """What the model does not allow (an attention to switch, Linear weights to keep in bf16): a result."""


@functools.cache
def load_factory(reference: str) -> Callable[..., nn.Module]:
    """The factory function `reference` names, imported once per process.

    Never in a process that forks measuring processes: the user's code may
    start CUDA (transformers' import may), after which no forked child could
    use it. Such a process asks a child (lmstudy.measure.model_facts).
    """
    from lmstudy.measure.fresh_process import forks_measuring_processes

    if forks_measuring_processes():
        raise RuntimeError(f"the model factory {reference!r} was to be imported in a process that forks "
                           "measuring processes: only its children may run the user's code")
    where, function = split_reference(reference)
    if is_file_reference(where):
        path = factory_file(reference)
        if not path.is_file():
            raise UserError(
                f"the model factory {reference!r}: the file {path} does not exist (a relative path is from "
                f"the project root): {FIX_FACTORY}."
            )
        # A module name of its own, so a user's model.py never shadows (or is shadowed by) another.
        name = "lmstudy_user_factory_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        loader = functools.partial(spec.loader.exec_module, module)
    else:
        module = None
        loader = functools.partial(importlib.import_module, where)
    try:
        loaded = loader()
    except STOPS as error:
        raise UserError(f"the model factory {reference!r}: {_stopped(error)} while its module was imported: "
                        "a module a job imports must not exit or stop (keep such code under "
                        "`if __name__ == \"__main__\":`).") from None
    except Exception as error:  # noqa: BLE001 - whatever the user's module raises is theirs to fix
        raise UserError(f"the model factory {reference!r} could not be imported: "
                        f"{type(error).__name__}: {_one_line(error)}.") from error
    module = module if module is not None else loaded
    if module.__name__ not in sys.modules:
        sys.modules[module.__name__] = module  # classes in it must pickle by name for torch.compile
    factory = getattr(module, function, None)
    if not callable(factory):
        raise UserError(f"the model factory {reference!r}: {where} has no function {function!r}: "
                        f"{FIX_FACTORY}.")
    return factory


# The factories whose code this process has imported (and built once on the meta device): inherited
# by the processes it forks, which then import nothing again.
_IMPORTED: set[str] = set()


def import_model_code(choice: ModelChoice, dims: dict, context_length: int) -> None:
    """Import what the model's factory imports, on first use too, before a measuring process times its
    build: a cold start excludes imports (STUDY.md). Building the model once on the meta device runs the
    factory's lazy imports (transformers loads a model's module on first use) and allocates nothing;
    where that build fails, the real one says why. Nothing to do where this process, or the one it was
    forked from (lmstudy.measure.model_process), imported it already."""
    if choice.builtin or choice.factory in _IMPORTED:
        return
    load_factory(choice.factory)
    try:
        with torch.device("meta"):
            build_model(choice, dims, context_length)
    except Exception:  # noqa: BLE001 - the timed build that follows reports the model's own failure
        pass
    _IMPORTED.add(choice.factory)


def accepts_attention(factory: Callable) -> bool:
    """Whether the factory takes an `attention` keyword ("naive" or "sdpa"): the model can switch it."""
    try:
        return "attention" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def attention_not_applicable(choice: ModelChoice, attention: str) -> str | None:
    """Why the model of `choice` cannot be measured with `attention` (a sentence), or None where it can:
    any model runs as its factory builds it ("naive"); another attention needs a factory that takes
    an `attention` keyword."""
    if attention == "naive" or accepts_attention(load_factory(choice.factory)):
        return None
    return (f"switching the attention to {attention} needs a factory that takes an `attention` keyword, "
            f"and {choice.factory} does not.")


def factory_arguments(choice: ModelChoice, dims: dict, context_length: int) -> dict:
    """The keyword arguments of one size's call: its dimensions, the context length and its own keys."""
    return {**dims, "context_length": context_length, **dict(choice.extra)}


def build_model(choice: ModelChoice, dims: dict, context_length: int, attention: str = "naive") -> nn.Module:
    """The model of `choice` at one size, on the current default device (a torch.device context).

    `attention` other than "naive" needs a factory that accepts it, else NotApplicable.
    """
    factory = load_factory(choice.factory)
    kwargs = factory_arguments(choice, dims, context_length)
    why = attention_not_applicable(choice, attention)
    if why:
        raise NotApplicable(why)
    if accepts_attention(factory):
        kwargs["attention"] = attention
    try:
        model = factory(**kwargs)
    except STOPS as error:
        raise UserError(f"the model factory {choice.factory!r}: {_stopped(error)} when called with "
                        f"{_keywords(kwargs)}: a factory must return the model, not exit.") from None
    except Exception as error:  # noqa: BLE001 - the user's factory: its failure is theirs to fix
        from lmstudy.measure.devices import is_out_of_memory

        if is_out_of_memory(error):  # a size too large for the device (CUDA's or the CPU's): a result
            raise
        raise UserError(f"the model factory {choice.factory!r} failed when called with {_keywords(kwargs)}: "
                        f"{type(error).__name__}: {_one_line(error)}.") from error
    if not isinstance(model, nn.Module):
        raise UserError(f"the model factory {choice.factory!r} returned a {type(model).__name__}, "
                        "not a torch.nn.Module: return the model itself.")
    check_fp32(model, choice.factory)
    return model


def check_fp32(model: nn.Module, factory: str) -> None:
    """A UserError where a floating-point parameter is not fp32.

    Every precision of the study runs on fp32 weights (fp32 as it is, bf16
    and fp16 by autocast), and rows, FLOPs and MFU are labelled so: a model
    built in bf16 would be timed as bf16 and labelled fp32.
    """
    for name, parameter in model.named_parameters():
        if parameter.is_floating_point() and parameter.dtype != torch.float32:
            raise UserError(
                f"the model factory {factory!r} returned a model with {parameter.dtype} parameters "
                f"({name} among them), but every precision of the study runs on fp32 weights (bf16 and "
                "fp16 by autocast) and is labelled so: return the model in fp32 (no .to(torch.bfloat16), "
                ".half() or torch_dtype), and choose the precisions in the config instead."
            )


def check_not_meta(model: nn.Module, factory: str) -> None:
    """A UserError where the model built for measuring has a parameter or buffer on the meta device:
    a step on meta tensors computes nothing and takes no time, so it would be measured as a result."""
    tensors = [*model.named_parameters(), *model.named_buffers()]
    on_meta = [name for name, tensor in tensors if tensor.is_meta]
    if on_meta:
        raise UserError(
            f"the model factory {factory!r} returned a model with {len(on_meta)} of its {len(tensors)} "
            f"parameters and buffers on the meta device ({on_meta[0]} among them), where nothing is "
            "computed, so there is nothing to measure: build it on the current device (no "
            "torch.device(\"meta\"), device=\"meta\" or init_empty_weights in the factory)."
        )


def forward_logits(model: nn.Module, inputs: torch.Tensor, vocab_size: int, factory: str) -> torch.Tensor:
    """The model's logits for `inputs`: its forward called on the token ids alone, its output checked
    (logits_of). A forward that cannot take that call (an argument it requires: a TypeError) or fails
    in Python (ValueError, AttributeError, ...) is the factory's to fix, named in one sentence.
    torch's own errors (RuntimeError: out of memory, a backend's refusal, the meta device's limits)
    pass unchanged: the callers make results of them."""
    try:
        output = model(inputs)
    except UserError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's forward: its failure is theirs to fix
        if isinstance(error, RuntimeError) or type(error).__module__.startswith("torch"):
            raise
        raise UserError(f"the model of factory {factory!r} failed in its forward, called with token ids "
                        f"of shape {list(inputs.shape)} only: {type(error).__name__}: {_one_line(error)}."
                        ) from error
    return logits_of(output, inputs, vocab_size, factory)


def check_differentiable(loss: torch.Tensor, model: nn.Module, factory: str) -> None:
    """A UserError unless `loss` has a backward (free: no device synchronisation).

    The backward passes need logits computed from parameters that require
    grad; a model without any can still have its forward pass measured.
    """
    if loss.requires_grad:
        return
    if not any(p.requires_grad for p in model.parameters()):
        raise UserError(f"the model of factory {factory!r} has no parameter that requires grad, so it has no "
                        "backward to measure: measure its forward pass only (passes: [forward]).")
    raise UserError(f"the model of factory {factory!r} returned logits that do not require grad (detached, "
                    "or computed under torch.no_grad) although it has parameters that do: return logits "
                    "computed from its parameters, so that the backward passes can be measured.")


def logits_of(output, inputs: torch.Tensor, vocab_size: int, factory: str) -> torch.Tensor:
    """The logits in a model's output (a tensor, a tuple's first item, or `.logits`), checked for shape.

    Only shapes are compared (no device synchronisation): free on every step.
    """
    if isinstance(output, (tuple, list)) and output:
        output = output[0]
    elif not isinstance(output, torch.Tensor) and hasattr(output, "logits"):
        output = output.logits
    if not isinstance(output, torch.Tensor):
        raise UserError(f"the model of factory {factory!r} returned a {type(output).__name__} from its "
                        "forward, not logits: return a tensor, a tuple starting with one, or an object "
                        "with .logits.")
    expected = (*inputs.shape, vocab_size)
    if tuple(output.shape) != expected:
        raise UserError(f"the model of factory {factory!r} returned logits of shape {list(output.shape)} for "
                        f"token ids of shape {list(inputs.shape)}; expected [batch, context, vocab] = "
                        f"{list(expected)}.")
    if not output.is_floating_point():
        raise UserError(f"the model of factory {factory!r} returned logits of dtype {output.dtype}; logits "
                        "are floating-point scores over the vocabulary: return them unrounded.")
    return output


class CountOnDevice(Exception):
    """The model's forward cannot run on the meta device (it reads a value: Hugging Face's masks call
    .item()): its FLOPs are counted on the device, in a measuring process, with the model built there."""


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def parameters_on_meta(choice: ModelChoice, dims: dict, context_length: int) -> int:
    """The model's parameters (all of them), built on the meta device: nothing allocated."""
    with torch.device("meta"):
        return count_parameters(build_model(choice, dims, context_length))


def count_on_meta(choice: ModelChoice, dims: dict, context_length: int, batch_size: int) -> dict:
    """The model's parameters (all of them) and the FLOPs of one step of each pass, by PyTorch's
    FlopCounterMode, counted on the meta device: nothing is allocated or computed anywhere.

    FLOPs are those of fp32 arithmetic (autocast changes dtypes, not the count). A model whose forward
    cannot run on the meta device raises CountOnDevice: never a build on the host, which may not hold
    it and costs as much as measuring (count_flops counts it where it is measured).
    """
    with torch.device("meta"):
        model = build_model(choice, dims, context_length)
    try:
        flops = count_flops(model, batch_size, context_length, dims["vocab_size"], choice.factory)
    except RuntimeError as error:
        raise CountOnDevice(f"{type(error).__name__}: {_one_line(error)}") from None
    return {"parameters": count_parameters(model), **flops}


def count_flops(model: nn.Module, batch_size: int, context_length: int, vocab_size: int,
                factory: str) -> dict:
    """The FLOPs of one step of each pass of `model`, on the device its parameters are on, by
    FlopCounterMode: a forward without grad, then a forward and backward (whose gradients are left in
    the parameters' .grad: count after measuring)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper: count the module itself
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    inputs = torch.zeros(batch_size, context_length, dtype=torch.long, device=device)
    with torch.no_grad(), FlopCounterMode(display=False) as forward:
        forward_logits(model, inputs, vocab_size, factory)
    with FlopCounterMode(display=False) as training:
        logits = forward_logits(model, inputs, vocab_size, factory)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab_size).float(), inputs.reshape(-1))
        # A model without a backward (no parameters) has its forward counted and measured; its
        # backward passes stop where they are measured (check_differentiable), naming why.
        if loss.requires_grad:
            loss.backward()
    backward = training.get_total_flops() if loss.requires_grad else None
    with torch.no_grad(), ParametersInMatmuls(model) as in_matmuls:
        forward_logits(model, inputs, vocab_size, factory)
    return {
        "matmul_parameters": in_matmuls.count(),
        "forward": forward.get_total_flops(),
        # The optimizer's arithmetic is not counted (the MFU convention, as lmstudy.flops).
        "forward_backward": backward,
        "train_step": backward,
    }


# The matrix products of PyTorch's operators (aten), as a dispatch mode sees them.
MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "dot", "convolution", "_scaled_mm",
                        "_addmm_activation", "linear", "matmul"})


ADDING = frozenset({"addmm", "addmv", "baddbmm", "_addmm_activation"})


class ParametersInMatmuls:
    """The parameters that take part in a matrix product of one forward (the N of 6N): every
    embedding, position, norm and bias excepted, whatever it is called; a tied LM head counted once.

    A parameter takes part when its storage is an operand of a matrix product (a view of it, as the
    transpose a Linear takes, shares its storage); on the meta device too.
    """

    def __init__(self, model: nn.Module) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        self.storages = {p.untyped_storage()._cdata: p for p in model.parameters()}
        self.found: dict[int, int] = {}
        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func._schema.name.split("::")[-1]
                if name in MATMUL_OPS:
                    # addmm and its kind add their first operand (a bias) to the product: not in it
                    factors = args[1:] if name in ADDING else args
                    for arg in [*factors, *(kwargs or {}).values()]:
                        if isinstance(arg, torch.Tensor):
                            key = arg.untyped_storage()._cdata
                            if key in outer.storages:
                                outer.found[key] = outer.storages[key].numel()
                return func(*args, **(kwargs or {}))

        self.mode = Mode()

    def __enter__(self) -> ParametersInMatmuls:
        self.mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.mode.__exit__(*exc)

    def count(self) -> int:
        return sum(self.found.values())


# What a model's attention runs, by the operators a forward dispatches (the first that matches).
ATTENTION_OPS = (
    ("_scaled_dot_product_flash_attention", "SDPA, flash kernel"),
    ("_scaled_dot_product_efficient_attention", "SDPA, memory-efficient kernel"),
    ("_scaled_dot_product_cudnn_attention", "SDPA, cuDNN kernel"),
    ("_scaled_dot_product_fused_attention_overrideable", "SDPA, the backend's fused kernel"),
    ("_flash_attention_forward", "flash attention kernel"),
    ("_efficient_attention_forward", "memory-efficient attention kernel"),
    ("_native_multi_head_attention", "PyTorch's fused multi-head attention"),
    ("_transformer_encoder_layer_fwd", "PyTorch's fused encoder layer"),
    ("_softmax", "naive: matrix products and a softmax"),
)


def attention_run(model: nn.Module, inputs: torch.Tensor) -> str:
    """The attention `model` runs on `inputs`, as one forward (with grad, as the training passes) shows
    by the operators it dispatches: an SDPA kernel, a fused one of PyTorch's, or products and a softmax
    (the naive attention, and SDPA's math fallback)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(func._schema.name.split("::")[-1])
            return func(*args, **(kwargs or {}))

    with Mode():
        model(inputs)
    for op, label in ATTENTION_OPS:
        if any(name.startswith(op) for name in seen):
            return label
    return "none found (no attention kernel, no softmax)"


def count_on_device(model: nn.Module, batch_size: int, context_length: int, vocab_size: int,
                    factory: str) -> dict | None:
    """count_flops of a model built on the measuring device, after its measurement: with the measured
    batch, else (out of memory) with one sequence, scaled (FLOPs scale with the batch); None where
    neither fits."""
    from lmstudy.measure.devices import free_memory, is_out_of_memory

    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    for batch in dict.fromkeys((batch_size, 1)):
        try:
            counted = count_flops(model, batch, context_length, vocab_size, factory)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            model.zero_grad(set_to_none=True)
            free_memory(device)
            continue
        model.zero_grad(set_to_none=True)
        return {k: v * batch_size // batch if v is not None and k != "matmul_parameters" else v
                for k, v in counted.items()}
    return None


def _keywords(kwargs: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0].rstrip(".")[:300] if text else "(no message)"

