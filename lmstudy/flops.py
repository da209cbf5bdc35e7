"""Model FLOPs of one step, as the MFU convention counts them (PaLM, app. B).

A training step costs 6N + 12·L·H·Q·T FLOPs per token: N the parameters
that take part in matrix products (all but the input embedding, a lookup),
L layers, H heads, Q the head size, T the context length. The forward pass
alone is a third of that. The optimizer's FLOPs are negligible and not counted.
"""

from __future__ import annotations


def parameter_count(
    vocab_size: int, d_model: int, d_ff: int, num_layers: int, *, in_matmuls: bool = False, **_
) -> int:
    """Parameters of lmstudy.measure.model's Transformer LM (no biases, untied head): the one formula.

    Per block: q, k, v, output projections (4 d^2), SwiGLU (3 d d_ff) and two
    RMSNorm gains (2 d); then the LM head (d V), the token embedding (d V)
    and the final norm (d). `in_matmuls`: only those that take part in a
    matrix product (the projections and the LM head), the N of 6N.
    """
    matmuls = num_layers * (4 * d_model * d_model + 3 * d_model * d_ff) + d_model * vocab_size
    if in_matmuls:
        return matmuls
    return matmuls + num_layers * 2 * d_model + vocab_size * d_model + d_model


def training_flops_per_token(
    vocab_size: int, d_model: int, d_ff: int, num_layers: int, num_heads: int, context_length: int
) -> float:
    n = parameter_count(vocab_size, d_model, d_ff, num_layers, in_matmuls=True)
    d_head = d_model // num_heads
    return 6 * n + 12 * num_layers * num_heads * d_head * context_length


def flops_per_step(pass_name: str, batch_size: int, context_length: int, **dims) -> float:
    per_token = training_flops_per_token(context_length=context_length, **dims)
    if pass_name == "forward":
        per_token /= 3
    return per_token * batch_size * context_length


def matmul_flops(n: int, products: int = 1) -> int:
    """FLOPs of `products` square n x n matrix products: 2 n^3 each (a multiply and an add)."""
    return 2 * n**3 * products
