"""Model FLOPs of one step, as the MFU convention counts them (PaLM, app. B).

A training step costs 6N + 12·L·H·Q·T FLOPs per token: N the parameters
that take part in matrix products (all but the input embedding, a lookup),
L layers, H heads, Q the head size, T the context length. The forward pass
alone is a third of that. The optimizer's FLOPs are negligible and not counted.
"""

from __future__ import annotations


def matmul_parameters(vocab_size: int, d_model: int, d_ff: int, num_layers: int) -> int:
    attention = 4 * d_model * d_model
    feed_forward = 3 * d_model * d_ff
    return num_layers * (attention + feed_forward) + d_model * vocab_size  # + LM head


def training_flops_per_token(
    vocab_size: int, d_model: int, d_ff: int, num_layers: int, num_heads: int, context_length: int
) -> float:
    n = matmul_parameters(vocab_size, d_model, d_ff, num_layers)
    d_head = d_model // num_heads
    return 6 * n + 12 * num_layers * num_heads * d_head * context_length


def flops_per_step(pass_name: str, batch_size: int, context_length: int, **dims) -> float:
    per_token = training_flops_per_token(context_length=context_length, **dims)
    if pass_name == "forward":
        per_token /= 3
    return per_token * batch_size * context_length
