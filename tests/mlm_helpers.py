"""Shared helpers for the masked-LM tests: a tiny BERT masked LM that trains in seconds."""

from __future__ import annotations

from pathlib import Path


def save_tiny_mlm(folder: Path, tokenizer_path: str) -> str:
    """A 2-layer, 32-wide BERT masked LM with the given (WordPiece) tokenizer, saved to ``folder``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tokenizer_path)
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    BertForMaskedLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)
