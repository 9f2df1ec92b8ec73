"""The keys of the token store (:mod:`negtrain.data.encoded`): a fingerprint of what decides a
split's token ids, and the signature of a tokenizer, hashed from its content, not its path."""

from __future__ import annotations

import contextlib
import hashlib
import json
import weakref
from collections.abc import Iterable

#: The store's format version: part of every key and of every entry's meta.json, so an entry of
#: another format is never read.
CACHE_VERSION = "4"


def fingerprint(*parts: str | Iterable[str]) -> str:
    """A cache key from strings and iterables of strings (read once, never stored)."""
    h = hashlib.sha256(CACHE_VERSION.encode())
    for part in parts:
        if isinstance(part, str):
            part = (part,)
        for text in part:
            h.update(text.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        h.update(b"\x01")
    return h.hexdigest()[:32]


#: Signatures of tokenizers alive in this process, with what would show a change since (size and
#: special tokens): hashing a tokenizer's content takes ~0.1 s, and a build asks once per split.
_signatures: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tokenizer_signature(tokenizer) -> str:
    """What decides a tokenizer's ids: its class, vocabulary, merges, normalizer and added tokens,
    hashed from its content, not its path, so a moved copy still hits the cache and a retrained
    tokenizer saved over the same folder does not."""
    # Adding a token changes the size; setting a special token (pad = eos) changes the map.
    state = (len(tokenizer), json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str))
    with contextlib.suppress(TypeError):  # an object that takes no weak reference: not remembered
        known = _signatures.get(tokenizer)
        if known is not None and known[0] == state:
            return known[1]
    signature = _content_signature(tokenizer)
    with contextlib.suppress(TypeError):
        _signatures[tokenizer] = (state, signature)
    return signature


def _content_signature(tokenizer) -> str:
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        # Truncation and padding are call settings that transformers leaves on the backend.
        spec.pop("truncation", None)
        spec.pop("padding", None)
        h.update(json.dumps(spec, sort_keys=True).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    h.update(json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str).encode())
    h.update(str(len(tokenizer)).encode())
    return h.hexdigest()[:32]

