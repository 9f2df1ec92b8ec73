"""Computing only the first position in a classifier's last encoder layer.

A sequence classifier reads one position of the last layer: [CLS] (BERT's pooler) or <s>
(RoBERTa's head). The other positions of that layer are computed and thrown away, and that is
about a sixth of a 6-layer model's matmuls. Keys and values still cover every token, so the
first position's output is the same computation as in the full layer; the logits agree up to
float rounding, which the tests check.

Only architectures whose layer layout and head are known take this path (``SUPPORTED``); any
other model runs its ordinary forward.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import MethodType
from typing import Any

import torch
from torch import nn

# Classification classes whose head reads position 0 only, and whose encoder layers have the
# BERT layout (attention.self.{query,key,value}, attention.output, feed_forward_chunk).
SUPPORTED = frozenset({"BertForSequenceClassification", "RobertaForSequenceClassification", "XLMRobertaForSequenceClassification"})
#: Attention kernels whose mask is a tensor (the first query's row is cut from it).
MASKS_AS_TENSORS = frozenset({"eager", "sdpa"})


def last_layer(model: nn.Module) -> nn.Module | None:
    """The last encoder layer of a supported classifier (through a peft wrapper), else None."""
    # A transformers model or its peft wrapper: its parts (config, encoder, layers) are named per architecture.
    wrapped: Any = model
    base = wrapped.get_base_model() if hasattr(wrapped, "get_base_model") else wrapped
    if type(base).__name__ not in SUPPORTED:
        return None
    if getattr(base.config, "_attn_implementation", "eager") not in MASKS_AS_TENSORS:
        return None  # flex attention's mask is a BlockMask, not a (q, k) tensor to cut to one row
    layers = getattr(getattr(base, base.base_model_prefix, None), "encoder", None)
    layers = getattr(layers, "layer", None)
    if not layers:
        return None
    layer = layers[-1]
    attention = getattr(layer, "attention", None)
    if not all(hasattr(getattr(attention, "self", None), n) for n in ("query", "key", "value")) or not hasattr(layer, "feed_forward_chunk"):
        return None
    return layer


def _first_position_forward(layer: Any, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
    """The layer's output at position 0 only, shaped (batch, 1, hidden). ``layer``: a BERT-layout
    encoder layer, whose parts :func:`last_layer` checked."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    attn = layer.attention.self
    batch, length, _ = hidden_states.shape
    first = hidden_states[:, :1]
    query = attn.query(first).view(batch, 1, -1, attn.attention_head_size).transpose(1, 2)
    key = attn.key(hidden_states).view(batch, length, -1, attn.attention_head_size).transpose(1, 2)
    value = attn.value(hidden_states).view(batch, length, -1, attn.attention_head_size).transpose(1, 2)
    if attention_mask is not None and attention_mask.dim() == 4:
        attention_mask = attention_mask[:, :, :1, :]  # the first query's row of a (q, k) mask
    eager = sys.modules[type(attn).__module__].eager_attention_forward
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(attn.config._attn_implementation, eager)
    context, _ = attend(attn, query, key, value, attention_mask, dropout=attn.dropout.p if attn.training else 0.0, scaling=attn.scaling)
    attended = layer.attention.output(context.reshape(batch, 1, -1), first)
    return layer.feed_forward_chunk(attended)


@contextmanager
def first_position_only(model: nn.Module, enabled: bool = True) -> Iterator[bool]:
    """Within the block, the model's last layer computes position 0 only (when ``enabled`` and the
    architecture is supported). Yields whether it does."""
    layer = last_layer(model) if enabled else None
    if layer is None:
        yield False
        return
    layer.forward = MethodType(_first_position_forward, layer)
    try:
        yield True
    finally:
        del layer.forward  # back to the class's forward
