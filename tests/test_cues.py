"""The negation cue detector: whole-word, case-insensitive lexicon matching mapped to tokens."""

from __future__ import annotations

import pytest

from negtrain.core.errors import ConfigError
from negtrain.negation.cues import CueDetector, default_cues, split_sentences


@pytest.fixture(scope="module")
def detector() -> CueDetector:
    return CueDetector()


def cue_words(detector: CueDetector, text: str) -> list[str]:
    return [text[s:e] for s, e in detector.word_spans(text)]


@pytest.mark.parametrize(
    "text,expected",
    [
        # sentence edges, any case
        ("Not a single bird sang", ["Not"]),
        ("The bird did not", ["not"]),
        ("NEVER again.", ["NEVER"]),
        # words that contain a cue but are not one
        ("Take a note about the knot in the notebook", []),
        ("He knows nothing about the nook", ["nothing"]),
        ("Nobody's notion of a nonce word", ["Nobody"]),
        ("The noble nomad had an innocent idea", []),
        # contractions, straight and curly apostrophes
        ("I don't know", ["n't"]),
        ("She can’t swim and won't try", ["n’t", "n't"]),
        ("It isn't", ["n't"]),
        ("I cannot say", ["cannot"]),
        # multi-word cues; their function words are not cue words
        ("In the absence of rain, crops fail to grow", ["absence", "fail"]),
        ("He did not at all mind", ["not", "all"]),
        ("No one came", ["No", "one"]),
        ("by no means", ["no", "means"]),
        # across a line break inside a phrase
        ("they failed\nto arrive", ["failed"]),
        # neither ... nor
        ("Neither red nor blue", ["Neither", "nor"]),
        ("without a doubt", ["without"]),
    ],
)
def test_cue_words(detector, text, expected):
    assert cue_words(detector, text) == expected


def test_longest_phrase_wins_and_is_reported_whole(detector):
    (m,) = detector.find("I will not at all go.")
    assert m.cue == "not at all" and m.text("I will not at all go.") == "not at all"


def test_function_words_are_never_cue_words(detector):
    text = "In the absence of proof, the case is of no interest to them."
    assert all(text[s:e].lower() not in detector.function for s, e in detector.word_spans(text))
    with pytest.raises(ConfigError, match="only of function words"):
        CueDetector(["not", "of the"])


def test_lexicon_is_package_data():
    cues = default_cues()
    assert {"not", "n't", "never", "nothing", "without", "in the absence of", "fail to"} <= set(cues)
    assert "the" not in cues and "of" not in cues


def test_has_cue_and_sentence_split(detector):
    assert detector.has_cue("There is no cat.") and not detector.has_cue("There is a note.")
    assert split_sentences("He said no. Then it rained! A cat sat.") == ["He said no.", "Then it rained!", "A cat sat."]


def _flagged(detector, tokenizer, text):
    ids, flags = detector.tokenize(tokenizer, [text])
    tokens = tokenizer.convert_ids_to_tokens(ids[0])
    return [t for t, f in zip(tokens, flags[0], strict=False) if f]


def test_tokens_wordpiece(detector, minilm_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minilm_path)
    assert _flagged(detector, tok, "Nothing is not a note.") == ["nothing", "not"]
    # WordPiece splits don't into "don ' t": every piece overlapping n't is a cue token.
    assert _flagged(detector, tok, "I don't know") == ["don", "'", "t"]
    assert _flagged(detector, tok, "In the absence of rain") == ["absence"]
    # special tokens ([CLS], [SEP]) have empty offsets and are never cue tokens
    ids, flags = detector.tokenize(tok, ["not"])
    assert flags[0] == [False, True, False]


@pytest.fixture(scope="module")
def bpe_tokenizer():
    """A tiny byte-level BPE (RoBERTa/GPT-2 style), trained offline in the test."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [
        "Nothing is not a note. The knot is not tied. I don't know. Nobody came without a coat.",
        "In the absence of rain crops fail to grow. She can't and won't go. It is never over.",
    ] * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>", "<pad>", "<mask>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", mask_token="<mask>")


def test_tokens_byte_level_bpe(detector, bpe_tokenizer):
    flagged = _flagged(detector, bpe_tokenizer, "Nothing is not a note, the knot")
    assert [t.replace("Ġ", "") for t in flagged] == ["Nothing", "not"]
    # byte-level BPE splits don't into "Ġdon 't": both overlap n't, "Ġknow" does not
    assert _flagged(detector, bpe_tokenizer, "I don't know") == ["Ġdon", "'t"]
    flagged = _flagged(detector, bpe_tokenizer, "In the absence of rain")
    assert "".join(flagged).replace("Ġ", "") == "absence"
