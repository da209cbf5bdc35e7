"""A decoder-only Transformer language model, read top-down.

token embedding -> N pre-norm blocks (RMSNorm, causal multi-head attention
with RoPE, RMSNorm, SwiGLU) -> RMSNorm -> untied LM head. No biases, no
dropout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lmstudy.measure.markers import annotate
from lmstudy.ranges import ATTENTION_SCORES, FINAL_MATMUL, SOFTMAX


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    context_length: int
    d_model: int
    d_ff: int
    num_layers: int
    num_heads: int
    rope_theta: float = 10000.0
    attention: str = "naive"  # "naive" (profiled step by step) or "sdpa"

    def __post_init__(self):
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}"
            )
        if self.attention not in ("naive", "sdpa"):
            raise ValueError(f"attention must be 'naive' or 'sdpa', not {self.attention!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads


def _trunc_normal(*shape: int, std: float) -> nn.Parameter:
    weight = torch.empty(*shape)
    nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-3 * std, b=3 * std)
    return nn.Parameter(weight)


class Linear(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.weight = _trunc_normal(d_out, d_in, std=math.sqrt(2.0 / (d_in + d_out)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class Embedding(nn.Module):
    def __init__(self, num_embeddings: int, d_model: int):
        super().__init__()
        self.weight = _trunc_normal(num_embeddings, d_model, std=1.0)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.weight[token_ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalising in fp32 keeps the mean of squares exact under autocast.
        in_dtype = x.dtype
        x = x.float()
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x * rms * self.weight.float()).to(in_dtype)


class RotaryEmbedding(nn.Module):
    def __init__(self, d_head: int, max_seq_len: int, theta: float):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        # Not parameters and not saved: rebuilt from the config on load.
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Rotate pairs (x[..., 2i], x[..., 2i+1]) of x: (..., seq, d_head)."""
        seq_len = x.shape[-2]
        cos = self.cos[:seq_len].to(x.dtype)
        sin = self.sin[:seq_len].to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return rotated.flatten(-2)


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal_mask: torch.Tensor
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v in three steps that profilers see by name."""
    with annotate(ATTENTION_SCORES):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~causal_mask, float("-inf"))
    with annotate(SOFTMAX):
        probs = torch.softmax(scores, dim=-1)
    with annotate(FINAL_MATMUL):
        return probs @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        d = config.d_model
        self.num_heads = config.num_heads
        self.use_sdpa = config.attention == "sdpa"
        self.q_proj, self.k_proj = Linear(d, d), Linear(d, d)
        self.v_proj, self.output_proj = Linear(d, d), Linear(d, d)
        self.rope = RotaryEmbedding(config.d_head, config.context_length, config.rope_theta)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        return x.view(batch, seq, self.num_heads, d_model // self.num_heads).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        q = self.rope(self._split_heads(self.q_proj(x)))
        k = self.rope(self._split_heads(self.k_proj(x)))
        v = self._split_heads(self.v_proj(x))
        if self.use_sdpa:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
            out = scaled_dot_product_attention(q, k, v, mask)
        return self.output_proj(out.transpose(1, 2).reshape(batch, seq, d_model))


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1, self.w3 = Linear(d_model, d_ff), Linear(d_model, d_ff)
        self.w2 = Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.ln1 = RMSNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = RMSNorm(config.d_model)
        self.ffn = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TransformerLM(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.token_embeddings = Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(TransformerBlock(config) for _ in range(config.num_layers))
        self.ln_final = RMSNorm(config.d_model)
        self.lm_head = Linear(config.d_model, config.vocab_size)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        x = self.token_embeddings(token_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def make_optimizer(model: nn.Module, fused: bool | None = None) -> torch.optim.AdamW:
    """The study's AdamW; `fused=True` runs its step as one fused kernel (a ladder rung)."""
    return torch.optim.AdamW(
        model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=fused
    )


def build(
    vocab_size: int,
    context_length: int,
    d_model: int,
    d_ff: int,
    num_layers: int,
    num_heads: int,
    attention: str = "naive",
) -> TransformerLM:
    """The built-in model's factory (config `model.factory`'s default): one size's keys in, the model out."""
    return TransformerLM(
        ModelConfig(
            vocab_size=vocab_size,
            context_length=context_length,
            d_model=d_model,
            d_ff=d_ff,
            num_layers=num_layers,
            num_heads=num_heads,
            attention=attention,
        )
    )
