"""Built-in ALiBi policies: the attention functions and paths that fit :class:`Alibi` to known model families.

A policy names, for one model family, the module holding the position embedding, the attention class, the method
of it to replace, the ALiBi version of that method, and an optional function that lifts length limits elsewhere in
the model. :meth:`Alibi.from_model <composer.algorithms.alibi.Alibi.from_model>` picks the policy whose attention
class the model contains. Families:

* ``'gpt'``: :class:`composer.models.GPT`.
* ``'gpt2'``: Hugging Face GPT-2 (``GPT2Model``, ``GPT2LMHeadModel``, ...), causal.
* ``'bert'``: Hugging Face BERT (``BertModel``, ``BertForMaskedLM``, ...), bidirectional (causal as a decoder).

The ``transformers`` replacements are written for its 5.x attention modules and work under the default
``attn_implementation='sdpa'`` and under ``'eager'``: they compute queries, keys and values with the module's own
layers, add the ALiBi bias to the mask ``transformers`` passes (None, boolean, or additive float), and call
:func:`torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from composer.algorithms.alibi.bias import AlibiBias, apply_bias_to_mask
from composer.models.gpt import CausalSelfAttention

__all__ = [
    "ALIBI_POLICIES",
    "AlibiPolicy",
    "bert_alibi_forward",
    "enlarge_position_buffers",
    "gpt2_alibi_forward",
    "gpt_alibi_forward",
]

_SUPPORTED_IMPLEMENTATIONS = ("sdpa", "eager")


@dataclasses.dataclass(frozen=True)
class AlibiPolicy:
    """Where ALiBi goes in one model family (every path is a dotted import path).

    Args:
        embedding_owner: Class of the module that holds the position embedding.
        position_embedding_name: The position embedding's attribute name on that module.
        attention_module_name: The attention class whose method is replaced.
        attr_to_replace: The method replaced.
        alibi_attention: The ALiBi version of that method.
        mask_replacement_function: ``function(model, max_sequence_length)`` lifting other length limits, or None.
    """

    embedding_owner: str
    position_embedding_name: str
    attention_module_name: str
    attr_to_replace: str
    alibi_attention: str
    mask_replacement_function: str | None = None


_HERE = "composer.algorithms.alibi.policies"

ALIBI_POLICIES: dict[str, AlibiPolicy] = {
    "gpt": AlibiPolicy(
        embedding_owner="composer.models.gpt.GPT",
        position_embedding_name="wpe",
        attention_module_name="composer.models.gpt.CausalSelfAttention",
        attr_to_replace="forward",
        alibi_attention=f"{_HERE}.gpt_alibi_forward",
    ),
    "gpt2": AlibiPolicy(
        embedding_owner="transformers.models.gpt2.modeling_gpt2.GPT2Model",
        position_embedding_name="wpe",
        attention_module_name="transformers.models.gpt2.modeling_gpt2.GPT2Attention",
        attr_to_replace="forward",
        alibi_attention=f"{_HERE}.gpt2_alibi_forward",
    ),
    "bert": AlibiPolicy(
        embedding_owner="transformers.models.bert.modeling_bert.BertEmbeddings",
        position_embedding_name="position_embeddings",
        attention_module_name="transformers.models.bert.modeling_bert.BertSelfAttention",
        attr_to_replace="forward",
        alibi_attention=f"{_HERE}.bert_alibi_forward",
        mask_replacement_function=f"{_HERE}.enlarge_position_buffers",
    ),
}
"""Family name -> policy. :meth:`Alibi.from_model` tries them in this order."""


def _alibi_of(module: nn.Module) -> AlibiBias:
    alibi = getattr(module, "alibi", None)
    if not isinstance(alibi, AlibiBias):
        raise RuntimeError(
            f"{type(module).__name__} runs an ALiBi attention function but has no ALiBi bias; install the function "
            "with composer.algorithms.alibi.apply_alibi (or the Alibi algorithm), not by hand."
        )
    return alibi


def _alibi_mask(
    module: nn.Module, query: torch.Tensor, key: torch.Tensor, attention_mask: Any, causal: bool
) -> torch.Tensor:
    """The additive mask ``(1, H, Q, K)`` or ``(B, H, Q, K)`` for queries ``(B, H, Q, d)`` and keys ``(B, H, K, d)``."""
    alibi = _alibi_of(module)
    alibi.check_heads(query.shape[1])
    bias = alibi(query.shape[2], key.shape[2], causal=causal, device=query.device, dtype=query.dtype)
    return apply_bias_to_mask(bias, attention_mask)


def _check_implementation(module: nn.Module) -> None:
    implementation = getattr(module.config, "_attn_implementation", None)
    if implementation not in _SUPPORTED_IMPLEMENTATIONS:
        raise ValueError(
            f"ALiBi for {type(module).__name__} supports attn_implementation {list(_SUPPORTED_IMPLEMENTATIONS)}, "
            f"but the model uses {implementation!r}. Load the model with attn_implementation='sdpa'."
        )


def _cached_keys_values(
    module: nn.Module, cache: Any, key: torch.Tensor, value: torch.Tensor, kwargs: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    # An encoder-decoder cache keeps self-attention keys apart from cross-attention ones.
    layer_cache = getattr(cache, "self_attention_cache", cache)
    keys, values = layer_cache.update(key, value, module.layer_idx, kwargs=kwargs)
    return keys, values


def gpt_alibi_forward(self: CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """ALiBi causal self-attention for :class:`composer.models.gpt.CausalSelfAttention`: ``(B, S, D) -> (B, S, D)``."""
    q, k, v = self.split_heads(x)  # (B, H, S, head_dim) each
    mask = _alibi_mask(self, q, k, None, causal=True)  # (1, H, S, S), the future masked
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
    return self.merge_heads(y)


def gpt2_alibi_forward(
    self: Any,
    hidden_states: torch.Tensor,
    cache: Any = None,
    attention_mask: Any = None,
    encoder_hidden_states: torch.Tensor | None = None,
    encoder_attention_mask: Any = None,
    output_attentions: bool | None = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """ALiBi self-attention for ``transformers``' ``GPT2Attention`` (cross-attention runs unchanged).

    Same arguments and results as ``GPT2Attention.forward`` (the attention weights are not returned).
    """
    if encoder_hidden_states is not None or self.is_cross_attention:
        # Queries and keys of cross-attention come from different sequences: no relative position to bias.
        result: tuple[torch.Tensor, None] = type(self).forward(
            self,
            hidden_states,
            cache=cache,
            attention_mask=attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            output_attentions=output_attentions,
            **kwargs,
        )
        return result
    _check_implementation(self)
    query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
    shape = (*hidden_states.shape[:-1], -1, self.head_dim)
    query, key, value = (t.view(shape).transpose(1, 2) for t in (query, key, value))  # (B, H, S, head_dim)
    if cache is not None:
        key, value = _cached_keys_values(self, cache, key, value, kwargs)
    mask = _alibi_mask(self, query, key, attention_mask, causal=True)
    dropout = self.attn_dropout.p if self.training else 0.0
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout, scale=self.scaling)
    out = out.transpose(1, 2).reshape(*hidden_states.shape[:-1], -1)
    return self.resid_dropout(self.c_proj(out)), None


def bert_alibi_forward(
    self: Any,
    hidden_states: torch.Tensor,
    attention_mask: Any = None,
    cache: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """ALiBi self-attention for ``transformers``' ``BertSelfAttention``: bidirectional, or causal as a decoder.

    Same arguments and results as ``BertSelfAttention.forward`` (the attention weights are not returned).
    """
    _check_implementation(self)
    shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
    query, key, value = (
        layer(hidden_states).view(shape).transpose(1, 2) for layer in (self.query, self.key, self.value)
    )
    if cache is not None:
        key, value = _cached_keys_values(self, cache, key, value, kwargs)
    mask = _alibi_mask(self, query, key, attention_mask, causal=bool(self.is_causal))
    dropout = self.dropout.p if self.training else 0.0
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout, scale=self.scaling)
    return out.transpose(1, 2).reshape(*hidden_states.shape[:-1], -1), None


def _refuse_longer_inputs(max_sequence_length: int, module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
    # A forward pre-hook: BERT-style embeddings would fail on a longer input with a shape error in their buffers.
    tokens = kwargs.get("input_ids", args[0] if args else None)
    if tokens is None and kwargs.get("inputs_embeds") is not None:
        tokens = kwargs["inputs_embeds"][..., 0]
    if tokens is None:
        return
    length = int(tokens.shape[-1]) + int(kwargs.get("cache_length", 0) or 0)
    if length > max_sequence_length:
        raise ValueError(
            f"ALiBi attention got a sequence of length {length}, longer than max_sequence_length="
            f"{max_sequence_length}. Pass a larger max_sequence_length to Alibi (or apply_alibi), or shorten the "
            "inputs."
        )


def enlarge_position_buffers(model: nn.Module, max_sequence_length: int) -> None:
    """Lengthens every ``position_ids`` / ``token_type_ids`` buffer of shape ``(1, N)`` to ``max_sequence_length``.

    BERT-style embeddings slice these buffers to the input length, so inputs longer than the original
    ``max_position_embeddings`` would otherwise fail even without a position embedding. The modules holding them
    also get a check that refuses inputs longer than ``max_sequence_length`` with a clear ValueError (replacing the
    check of an earlier call).

    Args:
        model: The model; every submodule with such buffers is changed in place.
        max_sequence_length: The new length.
    """
    for module in model.modules():
        position_ids = module._buffers.get("position_ids")
        if position_ids is None or position_ids.ndim != 2:
            continue
        previous = module.__dict__.pop("_alibi_length_check", None)
        if previous is not None:
            previous.remove()
        check = functools.partial(_refuse_longer_inputs, max_sequence_length)
        module.__dict__["_alibi_length_check"] = module.register_forward_pre_hook(check, with_kwargs=True)
        if position_ids.shape[1] >= max_sequence_length:
            continue
        device = position_ids.device
        # Same layout as transformers builds them: (1, max_len), not saved in the state dict.
        module.register_buffer(
            "position_ids", torch.arange(max_sequence_length, device=device).expand(1, -1), persistent=False
        )
        if isinstance(module._buffers.get("token_type_ids"), torch.Tensor):
            zeros = torch.zeros(1, max_sequence_length, dtype=torch.long, device=device)
            module.register_buffer("token_type_ids", zeros, persistent=False)
