"""What a model is given for an empty context, as lm-evaluation-harness gives it.

A benchmark whose choices are whole sentences (BLiMP) scores each one from an empty context.
lm-evaluation-harness (``TemplateLM.loglikelihood``, 0.4.x) then conditions on one token, the
model's ``prefix_token_id``: its BOS token, or its EOS token where it has no BOS; the continuation
is tokenized without special tokens. So the first word is scored like every other.

The in-process backend tokenizes a context with the tokenizer's special tokens and splits the
continuation off ``context + continuation`` (:mod:`negtrain.serving.in_process_inputs`). The same
ids follow from a context text chosen here:

- a tokenizer that starts every text with that token itself (Llama's BOS): the empty text;
- one that adds nothing (GPT-2, whose BOS and EOS are ``<|endoftext|>``): the token's own text,
  which the tokenizer reads as that one special token.

Anything else (no BOS or EOS, or a special token whose text does not tokenize back to it) cannot
be matched and is one error line; so is a backend without the model's tokenizer here (a server
tokenizes text itself, so negtrain cannot put the token before the sentence).
"""

from __future__ import annotations

from typing import Any

from negtrain.core.errors import ConfigError


def prefix_token_id(tokenizer: Any) -> int | None:
    """lm-evaluation-harness's ``HFLM.prefix_token_id``: BOS, else EOS."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def empty_context_text(backend: Any, where: str) -> str:
    """The context text whose ids are ``[prefix_token_id]`` for ``backend``'s tokenizer."""
    tokenizer = getattr(backend, "tokenizer", None)
    name = getattr(backend, "name", "this")
    if tokenizer is None:
        raise ConfigError(
            f"{where}: each sentence is scored from an empty context, after the model's BOS (or EOS) token as "
            f"lm-evaluation-harness scores it; the {name} backend's server tokenizes the text itself, so negtrain "
            "cannot give it that token: score it with --backend hf (the model in this process)"
        )
    if getattr(backend, "encoder_decoder", False):
        raise ConfigError(f"{where}: an empty context is scored for a causal LM only, not an encoder-decoder")
    prefix = prefix_token_id(tokenizer)
    if prefix is None:
        raise ConfigError(f"{where}: the tokenizer has neither a BOS nor an EOS token to score a sentence after")
    if list(tokenizer("")["input_ids"]) == [prefix]:
        return ""
    text = tokenizer.convert_ids_to_tokens(prefix)
    if not isinstance(text, str) or list(tokenizer(text)["input_ids"]) != [prefix]:
        raise ConfigError(
            f"{where}: the tokenizer does not read its BOS/EOS token's text {text!r} back as that token, so the "
            "empty context lm-evaluation-harness scores after cannot be given"
        )
    return text
