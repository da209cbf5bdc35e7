"""Section 3 (b): which part of a normalisation layer is sensitive to fp16 and bf16, measured.

The course asks what in LayerNorm is precision-sensitive and whether bf16 still needs it
treated differently. Rather than say it, this measures it on the study model's own
activations (the residual stream that enters its final RMSNorm, captured by a forward hook):
RMSNorm and LayerNorm are written out as their inner operations, and the error of the output
against fp32 is measured

- with every operation in the low precision (what an fp16 or bf16 layer would do),
- with one operation at a time in the low precision and the rest in fp32 (which operation
  causes the error),
- as the study model computes RMSNorm: upcast to fp32 inside, cast back at the end.

The same activations scaled up (`scales`) stand for the large residual values of a trained
model, where squaring overflows fp16 (its largest number is 65504) but not bf16.
The error is normwise per token: ||y - y_fp32|| / ||y_fp32||, its mean and maximum over tokens.
"""

from __future__ import annotations

import torch

LOW = {"fp16": torch.float16, "bf16": torch.bfloat16}
EPS = 1e-5
ALL = "(every operation)"
AS_MODEL = "(fp32 inside, as the study model)"


def _rms_ops(eps: float):
    """RMSNorm as named operations on a state: each reads earlier results and adds its own."""
    return [
        ("input", lambda s: s["x"]),
        ("square", lambda s: s["input"] * s["input"]),
        ("mean of squares", lambda s: s["square"].mean(-1, keepdim=True)),
        ("rsqrt", lambda s: torch.rsqrt(s["mean of squares"] + eps)),
        ("scale by rsqrt", lambda s: s["input"] * s["rsqrt"]),
        ("gain", lambda s: s["scale by rsqrt"] * s["weight"]),
    ]


def _layer_norm_ops(eps: float):
    return [
        ("input", lambda s: s["x"]),
        ("mean", lambda s: s["input"].mean(-1, keepdim=True)),
        ("subtract mean", lambda s: s["input"] - s["mean"]),
        ("variance", lambda s: (s["subtract mean"] * s["subtract mean"]).mean(-1, keepdim=True)),
        ("rsqrt", lambda s: torch.rsqrt(s["variance"] + eps)),
        ("scale by rsqrt", lambda s: s["subtract mean"] * s["rsqrt"]),
        ("gain and bias", lambda s: s["scale by rsqrt"] * s["weight"] + s["bias"]),
    ]


NORMS = {"RMSNorm": _rms_ops, "LayerNorm": _layer_norm_ops}


def run_ops(
    ops, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, low: set[str], dtype
) -> torch.Tensor:
    """The norm's output in fp32, with the operations named in `low` computed in `dtype`
    (their inputs rounded to it, their result kept as `dtype` gives it, then back to fp32)."""
    state = {"x": x.float(), "weight": weight.float(), "bias": bias.float()}
    for name, op in ops:
        if name in low:
            rounded = {k: v.to(dtype) for k, v in state.items()}
            state[name] = op(rounded).float()
        else:
            state[name] = op(state)
    return state[ops[-1][0]]


def relative_error(y: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Per token (last dimension): ||y - ref|| / ||ref||; inf where y is not finite."""
    y, reference = y.double(), reference.double()
    error = (y - reference).norm(dim=-1) / reference.norm(dim=-1).clamp_min(1e-30)
    return torch.where(torch.isfinite(y).all(-1), error, torch.full_like(error, float("inf")))


def norm_errors(x: torch.Tensor, scales=(1.0, 100.0), eps: float = EPS) -> list[dict]:
    """One row per norm x precision x scale x what ran in low precision (see the module doc)."""
    x = x.reshape(-1, x.shape[-1]).float()
    d = x.shape[-1]
    weight, bias = torch.ones(d, device=x.device), torch.zeros(d, device=x.device)
    rows = []
    for norm, make in NORMS.items():
        ops = make(eps)
        names = [name for name, _ in ops]
        for scale in scales:
            xs = x * scale
            reference = run_ops(ops, xs, weight, bias, set(), None)
            for precision, dtype in LOW.items():
                cases = [(ALL, set(names))] + [(name, {name}) for name in names]
                for label, low in cases:
                    error = relative_error(run_ops(ops, xs, weight, bias, low, dtype), reference)
                    rows.append(_row(norm, precision, scale, label, error, xs))
                # The model's way: the input arrives in the low precision, the norm runs in fp32,
                # the output is cast back.
                inside = run_ops(ops, xs.to(dtype).float(), weight, bias, set(), None).to(dtype).float()
                rows.append(_row(norm, precision, scale, AS_MODEL, relative_error(inside, reference), xs))
    return rows


def _row(norm, precision, scale, label, error, xs) -> dict:
    finite = error[torch.isfinite(error)]
    return {
        "norm": norm,
        "precision": precision,
        "scale": scale,
        "low_precision_op": label,
        "error_mean": float(finite.mean()) if len(finite) else float("inf"),
        "error_max": float(error.max()),
        "nonfinite_tokens": int((~torch.isfinite(error)).sum()),
        "tokens": int(error.numel()),
        "input_rms": float(xs.pow(2).mean().sqrt()),
        "input_abs_max": float(xs.abs().max()),
    }


def model_activations(model: torch.nn.Module, token_ids: torch.Tensor) -> torch.Tensor:
    """The residual stream entering the model's final norm (`ln_final`), in fp32, by a forward hook."""
    captured = {}
    norm = getattr(model, "ln_final", None)
    if norm is None:
        raise ValueError("the model has no ln_final: the norm experiment needs the built-in model")
    hook = norm.register_forward_hook(lambda m, inputs, out: captured.setdefault("x", inputs[0].detach()))
    try:
        with torch.no_grad():
            model(token_ids)
    finally:
        hook.remove()
    return captured["x"].float()


def built_in_model_errors(dims: dict, batch_size: int, device: torch.device, scales) -> list[dict]:
    """norm_errors on the activations of the built-in model of these dimensions (ModelConfig's fields),
    from a fixed seed: the norms' experiment studies its RMSNorm whatever model the study measures."""
    from lmstudy.measure.model import ModelConfig, TransformerLM

    torch.manual_seed(0)
    config = ModelConfig(**dims)
    model = TransformerLM(config).to(device)
    tokens = torch.randint(config.vocab_size, (batch_size, config.context_length), device=device)
    return norm_errors(model_activations(model, tokens), scales=tuple(scales))
