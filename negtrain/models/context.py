"""How long an evaluation prompt may be: the model's own context, never a training setting, and
never cut without the run saying so.

A language model is evaluated at its context length: its config's ``max_position_embeddings``
(or the name its architecture gives it), or its tokenizer's ``model_max_length`` where that is
smaller and real (transformers writes ``int(1e30)`` when a tokenizer states none). A seq2seq
encoder is held to the same (T5 checkpoints state 512 in their tokenizer). A model that states
neither (T5's relative positions have no fixed length) is given its prompts whole.

A prompt plus the room its answer needs (``max_new_tokens`` for generation, the longest
continuation for log-likelihood scoring; none for a seq2seq encoder) that does not fit is an
error before anything is scored (:class:`negtrain.core.errors.ConfigError`), naming the benchmark, the
row, the prompt's length and the limit. ``evaluation.truncate: left`` (``--truncate left``) cuts
such prompts from the start instead (keeping BOS), as lm-evaluation-harness does; the rows cut
are then counted (``n_truncated``) and each logged prompt is the text the model saw.

A few-shot entry may name the fewest shots its prompts may drop to (``min_shots``, CondaQA's rule
in Ravichander et al. 2022, Appendix C.2: nine shots, "sometimes only 8 fit in the context"):
:func:`fit_shots` gives each row the most shots, from ``shots`` down to ``min_shots``, whose prompt
fits, dropping the last shot first; a row that fits with none of them is the error above (or cut,
under ``truncate: left``), raised while the prompts are built, before anything is generated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from negtrain.data.encoded import EncodedSplit
from negtrain.core.errors import ConfigError
from negtrain.prompts.strategies import Prompt

#: A tokenizer's ``model_max_length`` at or above this is transformers' "no limit" stand-in.
NO_LIMIT = 10**9

#: The config attributes architectures give their context length, in the order they are read.
POSITION_ATTRIBUTES = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")

#: What ``evaluation.truncate`` may be: never cut (an error instead), or cut from the left.
TRUNCATE_MODES = ("none", "left")


@dataclass(frozen=True)
class Context:
    """The most tokens a model is given in evaluation, where that number comes from (for
    messages), and whether a prompt that does not fit is cut (``left``) or an error (``none``)."""

    limit: int
    source: str
    truncate: str = "none"


#: The limit of a model that states no context length: no prompt is over it.
UNLIMITED = 2**62


def model_context(model_config, tokenizer, truncate: str = "none") -> Context:
    """The evaluation context of a model from its config and tokenizer; :data:`UNLIMITED` when
    neither states one."""
    found: list[tuple[int, str]] = []
    for name in POSITION_ATTRIBUTES:
        value = getattr(model_config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            raise ConfigError(f"the model config's {name} is {value}; a model's context is a positive number of tokens "
                              "(fix config.json)")
        if isinstance(value, int) and value > 0:
            found.append((value, f"the model config's {name}"))
            break
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < NO_LIMIT:
        found.append((value, "the tokenizer's model_max_length"))
    if not found:
        return Context(UNLIMITED, "the model states no context length", truncate)
    limit, source = min(found)
    return Context(limit, source, truncate)


def rows_over(lengths: Sequence[int], rooms: Sequence[int] | int, context: Context, where: str, row_ids: Sequence[str]) -> list[int]:
    """The rows whose prompt (``lengths``) plus answer room does not fit ``context``. With
    ``truncate: none`` any such row is an error, raised before anything is scored."""
    room = [rooms] * len(lengths) if isinstance(rooms, int) else list(rooms)
    over = [i for i, (n, r) in enumerate(zip(lengths, room, strict=False)) if n + r > context.limit]
    if over and context.truncate == "none":
        first = over[0]
        answer = f" and its answer needs {room[first]} more" if room[first] else ""
        raise ConfigError(
            f"{where}: {len(over)} of {len(lengths)} prompts do not fit the model's context of {context.limit} tokens "
            f"({context.source}); the first, row {row_ids[first]}, is {lengths[first]} tokens{answer}. "
            "Use fewer shots, a model with a longer context, or --truncate left (evaluation.truncate: left), "
            "which cuts each such prompt from the start and counts the rows cut as n_truncated"
        )
    return over


def cut_left(ids: Sequence[int], keep: int, bos: int | None) -> list[int]:
    """The last ``keep`` tokens of ``ids``, with its BOS kept in front when it starts with one."""
    ids = list(ids)
    if len(ids) <= keep:
        return ids
    if bos is not None and ids and ids[0] == bos:
        return ids[:1] + ids[len(ids) - (keep - 1):]
    return ids[len(ids) - keep:]


def truncation_note(context: Context) -> str:
    """What a record cut under ``truncate: left`` says next to its numbers."""
    return (f"--truncate left: prompts longer than the model's context of {context.limit} tokens (with their answer room) "
            "were cut from the start; n_truncated counts them, and the logged prompt is the text the model saw")


def fit_split(split: EncodedSplit, room: int, context: Context, where: str, row_ids: Sequence[str], bos: int | None) -> tuple[EncodedSplit, list[int]]:
    """``split``'s prompts held to ``context`` with ``room`` tokens left for the answer: as they
    are when every one fits; else an error (``truncate: none``) or the long ones cut from the
    start (``left``). Also the rows cut."""
    over = rows_over(split.lengths.tolist(), room, context, where, row_ids)
    if not over:
        return split, []
    keep = context.limit - room
    if keep < 2:
        raise ConfigError(f"{where}: the answer needs {room} tokens of the model's context of {context.limit} ({context.source}), "
                          "which leaves no room for a prompt; lower the number of tokens generated (max_new_tokens)")
    offsets, ids = split.offsets.tolist(), split.input_ids
    rows = [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(split))]
    for i in over:
        rows[i] = cut_left(rows[i], keep, bos)
    return EncodedSplit.from_lists(rows, None), over


def fit_shots(prompts: Sequence[Prompt], shot_ids: Sequence[Sequence[str]], lengths_of: Callable[[Sequence[Prompt]], list[int]],
              room: Sequence[int] | int, context: Context, fewest: int, where: str, row_ids: Sequence[str],
              ) -> tuple[list[Prompt], list[list[str]]]:
    """Each row's prompt with the most of its shots, from all of them down to ``fewest``, that fits
    ``context`` with its answer ``room``: the last shot is dropped first (a fixed shot set's first
    ``k`` in file order stay). ``lengths_of``: the prompts' lengths in tokens, as the model is given
    them. A row that does not fit even with ``fewest`` shots is an error naming it (``truncate:
    none``; under ``left`` it keeps ``fewest`` shots and is cut later, and counted)."""
    prompts, ids = list(prompts), [list(x) for x in shot_ids]
    rooms = [room] * len(prompts) if isinstance(room, int) else list(room)
    todo = list(range(len(prompts)))
    while todo:
        length = dict(zip(todo, lengths_of([prompts[i] for i in todo]), strict=True))
        over = [i for i in todo if length[i] + rooms[i] > context.limit]
        can_drop = [i for i in over if len(prompts[i].shots) > fewest]
        stuck = [i for i in over if len(prompts[i].shots) <= fewest]
        if stuck and context.truncate == "none":
            first = stuck[0]
            n = length[first]
            answer = f" and its answer needs {rooms[first]} more" if rooms[first] else ""
            raise ConfigError(
                f"{where}: a prompt does not fit the model's context of {context.limit} tokens ({context.source}) even with "
                f"{len(prompts[first].shots)} shot(s), the fewest this entry allows (min_shots); row {row_ids[first]} is {n} tokens"
                f"{answer}. Use a model with a longer context, a lower min_shots, or --truncate left (evaluation.truncate: left)"
            )
        for i in can_drop:
            prompts[i] = replace(prompts[i], shots=prompts[i].shots[:-1])
            ids[i] = ids[i][:-1]
        todo = can_drop
    return prompts, ids
