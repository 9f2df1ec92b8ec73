"""``tiny-model OUT``: save a tiny random-weight language model with a real tokenizer, built offline
in seconds, to try the LLM features on (:mod:`negtrain.models.tiny`). Its numbers are chance level."""

from __future__ import annotations

import argparse
from pathlib import Path

from negtrain.core.card_settings import MAX_SEED
from negtrain.core.errors import NegtrainError

#: --kind: what it builds (in words, with the family that scores it), the builder in
#: negtrain.models.tiny, and whether its tokenizer can have a chat template.
KINDS = {
    "llama": ("a 2-layer Llama-style decoder (family causal_lm)", "save_tiny_llama", True),
    "t5": ("a 2-layer T5-style encoder-decoder (family seq2seq)", "save_tiny_t5", False),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, metavar="OUT", help="the folder to write (new, or empty)")
    p.add_argument("--kind", choices=tuple(KINDS), default="llama", help="llama (default: a causal LM) or t5 (seq2seq)")
    p.add_argument("--chat", action="store_true", help="llama: give the tokenizer a chat template ([INST] ... [/INST]), to try --chat")
    p.add_argument("--seed", type=_seed, default=0, help=f"seed of the random weights, 0 to {MAX_SEED} (default 0)")


def _seed(text: str) -> int:
    """A seed torch and numpy both take: one line for any other (argparse's ``type``)."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text} is out of range: give a whole number from 0 to {MAX_SEED}")
    return seed


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    what, builder, chat_able = KINDS[args.kind]
    if args.chat and not chat_able:
        raise NegtrainError(f"--chat: the tiny {args.kind} model has no chat template; use --kind llama")
    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise NegtrainError(f"{out}: exists and is not an empty folder; choose a new one")
    from negtrain.core.paths import check_output_dir

    check_output_dir(out, "OUT")
    from transformers.utils import logging as hf_logging

    from negtrain.models import tiny

    hf_logging.disable_progress_bar()
    getattr(tiny, builder)(out, seed=args.seed, **({"chat": True} if args.chat else {}))
    print(f"{out}: {what} with random weights{' and a chat template' if args.chat else ''}; "
          "every number it gets is chance level. Try:")
    print(f"  python -m negtrain evaluate --model {out} --benchmarks scone --strategy conditional_q --trainer.limit_val_batches=2")
    return 0
