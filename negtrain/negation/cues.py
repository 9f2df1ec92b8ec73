"""Finding negation cues in text, and the tokens they occupy under any tokenizer.

The cues are data: ``negtrain/resources/negation_cues.txt`` (one cue or phrase a line). A cue
matches as a whole word or phrase on word boundaries, case-insensitively, so "not" is found in
"Not now" and "is not." but never in "note", "knot" or "nothing" ("nothing" is a cue of its own).
The one exception is "n't", which attaches to the word before it ("don't", "isn't", "can't"). When
cues overlap, the longest match at a position wins ("not at all" over "not").

Function words (``function_words.txt``) are never cue tokens: inside "in the absence of" only
"absence" is marked, inside "fail to" only "fail". A lexicon entry made only of function words is
an error.

Cues are found on characters and mapped to tokens through the tokenizer's offsets (a fast
tokenizer's ``offset_mapping``), so any tokenizer works: a token is a cue token when its characters
overlap a cue word. A token that merges a cue with other characters is a cue token as a whole
(WordPiece splits "don't" into "don ' t", so "don", "'" and "t" are all marked).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from negtrain.core.errors import ConfigError

_APOSTROPHES = "'’"
_CONTRACTION = "n't"


def _read_list(name: str) -> list[str]:
    text = resources.files("negtrain").joinpath("resources").joinpath(name).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@lru_cache(maxsize=1)
def default_cues() -> tuple[str, ...]:
    return tuple(_read_list("negation_cues.txt"))


@lru_cache(maxsize=1)
def function_words() -> frozenset[str]:
    return frozenset(w.lower() for w in _read_list("function_words.txt"))


@dataclass(frozen=True)
class CueMatch:
    cue: str  # the lexicon entry that matched
    start: int  # character span of the whole match in the text
    end: int
    words: tuple[tuple[int, int], ...]  # character spans of the match's cue words (no function words)

    def text(self, source: str) -> str:
        return source[self.start : self.end]


class CueDetector:
    """Finds negation cues in text; reusable across data modules and tokenizers."""

    def __init__(self, cues: Iterable[str] | None = None, function: Iterable[str] | None = None) -> None:
        self.cues = tuple(dict.fromkeys(c.strip().lower() for c in (default_cues() if cues is None else cues) if c.strip()))
        self.function = frozenset(w.lower() for w in (function_words() if function is None else function))
        if not self.cues:
            raise ConfigError("the negation cue lexicon is empty")
        for cue in self.cues:
            words = cue.split()
            if all(w in self.function for w in words):
                raise ConfigError(f"negation cue '{cue}' is made only of function words; it would mark 'the'/'of' as cues")
        alternatives = []
        # Longest first, so a phrase wins over the single word it starts with.
        for cue in sorted(self.cues, key=lambda c: (-len(c), c)):
            if cue == _CONTRACTION:
                continue
            body = r"\s+".join(re.escape(w).replace("'", f"[{_APOSTROPHES}]") for w in cue.split())
            alternatives.append(body)
        parts = []
        if alternatives:
            parts.append(r"(?<![\w" + _APOSTROPHES + r"])(?:" + "|".join(alternatives) + r")(?!\w)")
        if _CONTRACTION in self.cues:
            parts.append(r"(?<=\w)n[" + _APOSTROPHES + r"]t(?!\w)")
        self._pattern = re.compile("|".join(parts), re.IGNORECASE)
        self._word = re.compile(r"[\w" + _APOSTROPHES + r"]+")

    def signature(self) -> list[str]:
        """What the detector's flags depend on, for cache keys: its cues and function words."""
        return [*self.cues, "\x02", *sorted(self.function)]

    def find(self, text: str) -> list[CueMatch]:
        matches = []
        for m in self._pattern.finditer(text):
            matched = m.group(0)
            key = " ".join(matched.lower().replace("’", "'").split())
            words = tuple(
                (m.start() + w.start(), m.start() + w.end())
                for w in self._word.finditer(matched)
                if w.group(0).lower() not in self.function
            )
            matches.append(CueMatch(key, m.start(), m.end(), words))
        return matches

    def has_cue(self, text: str) -> bool:
        return self._pattern.search(text) is not None

    def word_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of every cue word in ``text`` (what gets masked)."""
        return [span for m in self.find(text) for span in m.words]

    def token_flags(self, text: str, offsets: Sequence[tuple[int, int]]) -> list[bool]:
        """For each token (by its character offsets into ``text``): does it overlap a cue word?

        Tokens with an empty span, such as special tokens at (0, 0), are never cue tokens.
        """
        spans = self.word_spans(text)
        flags = []
        for start, end in offsets:
            flags.append(end > start and any(start < e and s < end for s, e in spans))
        return flags

    def tokenize(self, tokenizer, texts: Sequence[str], **kwargs) -> tuple[list[list[int]], list[list[bool]]]:
        """Token ids and per-token cue flags for each text, with any fast tokenizer."""
        if not getattr(tokenizer, "is_fast", False):
            raise ConfigError(
                f"the cue detector needs token offsets, which only a fast tokenizer gives; "
                f"{type(tokenizer).__name__} is not one"
            )
        enc = tokenizer(list(texts), return_offsets_mapping=True, **kwargs)
        flags = [self.token_flags(t, o) for t, o in zip(texts, enc["offset_mapping"], strict=False)]
        return enc["input_ids"], flags


_SENTENCE_END = re.compile(r"(?<=[.!?\"'])\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """A simple sentence splitter for corpus building: after . ! ? followed by a capital or digit."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
