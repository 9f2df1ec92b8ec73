"""Tiny language models with real tokenizers, built offline in seconds: something to try the LLM
features (`evaluate --family causal_lm`, strategies, protocols, `--chat`) on with no Hub access.

``negtrain tiny-model OUT`` saves one; the tests build theirs with the same functions. The
weights are random, so every number such a model gets is chance level: it shows what the commands
do and write, not what a model can do. Its tokenizer is trained here with the ``tokenizers``
library, in the style of each family:

- T5-style (seq2seq): a SentencePiece-like Unigram model (Metaspace "▁" pieces), ``<pad>``=0,
  ``</s>``=1, ``<unk>``=2, EOS appended to every input, as T5's tokenizer does.
- Llama-style (causal_lm): a byte-level BPE (so any text encodes) with ``<s>`` prepended and no
  pad token, as Llama's has none; optionally with a chat template (``[INST] ... [/INST]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

SPECIAL_T5 = ["<pad>", "</s>", "<unk>"]
SPECIAL_LLAMA = ["<unk>", "<s>", "</s>"]

#: A Llama-2-style chat template, for trying ``--chat``.
CHAT_TEMPLATE = "{% for m in messages %}<s>[INST] {{ m['content'] }} [/INST]{% endfor %}"

#: What the tokenizer of ``negtrain tiny-model`` learns its pieces from: the words of the
#: benchmarks' prompts and answers (any other text still encodes, in smaller pieces).
DEFAULT_TEXTS = [
    "Is the following statement True or False?", "True False True False yes no maybe don't know",
    "Premise: Hypothesis: Question: Does this imply that? Yes, no, or maybe? Answer:",
    "entailment neutral contradiction not_entailment",
    "A dog is an animal. A dog is never an animal. A chair is an animal. A chair is not an animal.",
    "The man is not playing a guitar. Nobody is asleep at home. No dogs are running through the field.",
    "Passage: Question: Answer: Let's think step by step. So the answer is",
] * 20


def t5_tokenizer(texts: Sequence[str]):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainers.UnigramTrainer(vocab_size=800, special_tokens=SPECIAL_T5, unk_token="<unk>", show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def llama_tokenizer(texts: Sequence[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(vocab_size=800, special_tokens=SPECIAL_LLAMA, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                           show_progress=False),  # its progress is blank lines when stdout is no terminal
    )
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def save_tiny_t5(out: Path, texts: Sequence[str] = DEFAULT_TEXTS, seed: int = 0) -> Path:
    """A 2-layer T5 (d_model 32) with random weights, saved with its tokenizer into ``out``."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    tok = t5_tokenizer(texts)
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=len(tok), d_model=32, d_ff=64, d_kv=8, num_layers=2, num_decoder_layers=2, num_heads=4,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, dropout_rate=0.0,
    )  # type: ignore[call-arg]  # the config dataclass takes decoder_start_token_id through **kwargs
    T5ForConditionalGeneration(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def save_tiny_llama(out: Path, texts: Sequence[str] = DEFAULT_TEXTS, seed: int = 0, chat: bool = False,
                    context: int = 8192) -> Path:
    """A 2-layer Llama (hidden 32) with random weights, saved with its tokenizer into ``out``;
    ``chat``: the tokenizer has :data:`CHAT_TEMPLATE`; ``context``: its max_position_embeddings,
    the length it is evaluated at (8,192: its 800-piece tokenizer spends about twice a real one's
    tokens, and CondaQA's nine-shot prompts need about 4,200 of them)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = llama_tokenizer(texts)
    if chat:
        tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=context, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out
