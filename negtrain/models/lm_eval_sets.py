"""The language-model families' eval sets that are not a prompt scored by the family's default:
multiple choice (NeQA; a ScoNe-NLG strategy's choices or completions) and cloze probes
(negated LAMA), each with its evaluator. Split from :mod:`negtrain.models.lm`, which builds its
eval sets with these (and keeps them importable from there).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch

from negtrain.benchmarks.base import Benchmark, Example, WrittenCompletions
from negtrain.models.continuation import continuation_logprobs
from negtrain.config import LanguageModelConfig
from negtrain.data.encoded import EncodedSplit
from negtrain.data.eval_set import EvalSet
from negtrain.benchmarks.negated_lama import common_vocabulary
from negtrain.metrics.cloze import cloze_rows, skipped_rows
from negtrain.models.cloze_vocab import common_vocab
from negtrain.models.context import Context
from negtrain.models.prompting import (
    AnswerMode,
    PromptSettings,
    prompts_with_shots,
)


from negtrain.models.lm_encoding import (
    Fitting, cloze_metric, cloze_prefixes, encode_causal_eval, encode_seq2seq_prompts, fitted_choice_inputs, mark_cut, padded,
    rendered_prompts, seen_prompts,
)



def predict_choices(module, batch: dict[str, torch.Tensor], inputs) -> torch.Tensor:
    """A multiple-choice set's evaluator: (B, choices) float64, every choice's summed
    log-likelihood; the metric picks the acc and acc_norm choices from them and the prediction
    lines carry them. ``inputs``: (context ids, choice ids, choice lengths in characters)."""
    contexts, choices, _ = inputs
    index = batch["index"]
    rows = index.tolist()
    with torch.no_grad():
        scores = continuation_logprobs(
            module.model, [contexts[i] for i in rows], [choices[i] for i in rows],
            encoder_decoder=module.encoder_decoder, pad_id=module.pad_id,
        )
    return scores.logprob.to(device=index.device, dtype=torch.float64)


@torch.no_grad()
def predict_cloze(module, batch: dict[str, torch.Tensor], prefixes, common: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """A causal LM's cloze evaluator: rows of :func:`negtrain.metrics.cloze.cloze_rows` from the
    next-token scores after the affirmative, negated and misprimed prefix (the vocabulary is the
    token space); skipped rows where the blank is not final. ``prefixes``: per example, the three
    prefixes' ids or None."""
    index = batch["index"]
    rows = index.tolist()
    out = skipped_rows(len(rows))
    scored = [r for r, i in enumerate(rows) if prefixes[i] is not None]
    if scored:
        seqs = [p for r in scored for p in prefixes[rows[r]]]
        ids = padded(seqs, module.pad_id).to(index.device)
        mask = padded([[1] * len(x) for x in seqs], 0).to(index.device)
        logits = module.model(input_ids=ids, attention_mask=mask).logits
        last = logits[torch.arange(len(seqs), device=ids.device), mask.sum(1) - 1].float().view(len(scored), 3, -1)
        identity = torch.arange(last.shape[-1], device=last.device)
        picked = torch.tensor([rows[r] for r in scored], dtype=torch.long)
        out[scored] = cloze_rows(last[:, 0], last[:, 1], last[:, 2], identity, common, gold[picked]).cpu()
    return out.to(index.device)


def cloze_eval_set(tokenizer, bench: Benchmark, split: str, examples: Sequence[Example]) -> EvalSet:
    """A causal LM's negated-LAMA eval set: scored by :func:`predict_cloze` (the batch's encoding
    is the affirmative prefix, or one BOS/EOS token for a skipped probe; it is not read)."""
    prefixes = cloze_prefixes(tokenizer, examples)
    fallback = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
    encoded = EncodedSplit.from_lists([p[0] if p is not None else fallback for p in prefixes], None)
    common = common_vocab(tokenizer, common_vocabulary(), causal=True)
    metric, gold = cloze_metric(tokenizer, examples, common)
    return EvalSet(
        bench, split, list(examples), encoded, predicted_labels=metric.space, metric=metric,
        evaluator=partial(predict_cloze, prefixes=prefixes, common=common.ids, gold=torch.tensor(gold, dtype=torch.long)),
    )


def choice_eval_set(tokenizer, bench: Benchmark, split: str, examples: Sequence[Example], cfg: LanguageModelConfig, causal: bool,
                    context: Context) -> EvalSet:
    """A multiple-choice eval set (NeQA), scored by :func:`predict_choices`."""
    inputs, cut = fitted_choice_inputs(tokenizer, bench, examples, cfg, causal, None, fitting_of(context, bench, split, examples))
    metric = bench.metric(examples)
    mark_cut(metric, cut, context)
    return EvalSet(
        bench, split, list(examples), EncodedSplit.from_lists(inputs[0], None),
        metric=metric, evaluator=partial(predict_choices, inputs=inputs),
    )


def fitting_of(context: Context, bench: Benchmark, split: str, examples: Sequence[Example]) -> Fitting:
    return Fitting(context, f"{bench.name}/{split}", [e.id for e in examples])


def strategy_choice_eval_set(tokenizer, bench: Benchmark, split: str, examples: Sequence[Example], settings: PromptSettings,
                            cfg: LanguageModelConfig, causal: bool, seed: int, log: bool, context: Context) -> EvalSet:
    """A multiple-choice benchmark put through one of its prompt strategies (ScoNe-NLG): with a
    generating strategy the model completes each prompt and the completions are written as the
    predictions, for people to judge (``EvalSet.completions``); with a log-likelihood strategy its
    choices are scored after the strategy's prompt (zero-shot, or after the paper's
    demonstrations) as :func:`predict_choices` scores them. The choice scorer reads the plain
    prompt text, never a chat template."""
    strategy = settings.strategy_of(bench)
    prompts, shot_ids = prompts_with_shots(bench, split, examples, settings, cfg, seed)
    fitting = fitting_of(context, bench, split, examples)
    if settings.answer_mode(bench) is AnswerMode.COMPLETIONS:
        # COMPLETIONS: a generating strategy on a multiple-choice benchmark, which only a benchmark
        # whose completions people judge has.
        assert strategy is not None and isinstance(bench, WrittenCompletions)
        texts, chatted = rendered_prompts(tokenizer, prompts, cfg)
        if causal:
            encoded, cut = encode_causal_eval(tokenizer, bench, texts, cfg, strategy.answer.max_new_tokens, chatted, fitting)
        else:
            encoded, cut = encode_seq2seq_prompts(tokenizer, texts, cfg, chatted, fitting)
        metric = bench.completions_metric(examples)
        metric.counts_unparsed = True
        mark_cut(metric, cut, context)
        return EvalSet(
            bench, split, list(examples), encoded, metric=metric, shot_ids=shot_ids, answering=strategy.answer,
            prompts=seen_prompts(tokenizer, texts, encoded, cut, chatted) if log else None, variant=settings.variant,
            log_samples=log, completions=True,
        )
    contexts = [p.text() for p in prompts]
    inputs, cut = fitted_choice_inputs(tokenizer, bench, examples, cfg, causal, contexts, fitting)
    metric = bench.metric(examples)
    mark_cut(metric, cut, context)
    if cut:  # the text each cut context kept (the choice scorer tokenizes contexts as plain text)
        contexts = list(contexts)
        for i in cut:
            contexts[i] = tokenizer.decode(inputs[0][i], skip_special_tokens=True)
    return EvalSet(
        bench, split, list(examples), EncodedSplit.from_lists(inputs[0], None), metric=metric,
        evaluator=partial(predict_choices, inputs=inputs), shot_ids=shot_ids,
        prompts=contexts if log else None, variant=settings.variant, log_samples=log,
    )
