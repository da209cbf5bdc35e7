"""Hugging Face causal LMs as model factories: config `model.factory: lmstudy.measure.hf_factory:llama`.

Each builds the model from its config class with the size's dimensions and
random weights: nothing is downloaded. Needs `transformers` (pip install -e
".[hf]"). `attention` naive is Hugging Face's eager attention (each step a
kernel of its own), sdpa PyTorch's fused kernel. No KV cache (a training
study) and no dropout; input and output embeddings untied, as the built-in
model's. Keys a size adds beyond the four (num_kv_heads, ...) reach the
config.
"""

from __future__ import annotations

import importlib

ATTENTION = {"naive": "eager", "sdpa": "sdpa"}


def _causal_lm(config_name: str, model_name: str, attention: str, **fields):
    try:
        transformers = importlib.import_module("transformers")
    except ImportError as error:
        raise ImportError('transformers is not installed: pip install -e ".[hf]"') from error
    config = getattr(transformers, config_name)(
        use_cache=False, tie_word_embeddings=False, attn_implementation=ATTENTION[attention], **fields
    )
    return getattr(transformers, model_name)(config)


def _llama_like(config_name, model_name, vocab_size, context_length, d_model, d_ff, num_layers, num_heads,
                attention, num_kv_heads):
    """Llama and the families that share its config's field names (Qwen2)."""
    return _causal_lm(
        config_name, model_name, attention, vocab_size=vocab_size,
        max_position_embeddings=context_length, hidden_size=d_model, intermediate_size=d_ff,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads or num_heads,
    )


def llama(vocab_size, context_length, d_model, d_ff, num_layers, num_heads, attention="naive",
          num_kv_heads=None):
    return _llama_like("LlamaConfig", "LlamaForCausalLM", vocab_size, context_length, d_model, d_ff,
                       num_layers, num_heads, attention, num_kv_heads)


def qwen2(vocab_size, context_length, d_model, d_ff, num_layers, num_heads, attention="naive",
          num_kv_heads=None):
    return _llama_like("Qwen2Config", "Qwen2ForCausalLM", vocab_size, context_length, d_model, d_ff,
                       num_layers, num_heads, attention, num_kv_heads)


def gpt2(vocab_size, context_length, d_model, d_ff, num_layers, num_heads, attention="naive"):
    return _causal_lm(
        "GPT2Config", "GPT2LMHeadModel", attention, vocab_size=vocab_size, n_positions=context_length,
        n_embd=d_model, n_inner=d_ff, n_layer=num_layers, n_head=num_heads,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
