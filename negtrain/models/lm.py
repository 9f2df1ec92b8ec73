"""The language-model families: ``seq2seq`` (AutoModelForSeq2SeqLM: T5, UnifiedQA, Flan-T5) and
``causal_lm`` (AutoModelForCausalLM: Llama-style decoders).

Both read any benchmark through a prompt: ``model.prompt`` (or the benchmark's default) with the
benchmark's input names as placeholders. What a benchmark's answers are decides how it is
trained and predicted:

- **Generative benchmarks** (free-text answers, e.g. CondaQA). Training: cross-entropy on the
  answer tokens (+ EOS). Prediction: greedy ``generate`` (no sampling, one beam), batched; the
  text is compared with the gold answer by the benchmark (:meth:`Benchmark.is_correct`), the
  metric receives 1/0, and the prediction files hold the generated text.
- **Multiple-choice benchmarks** (``answer_type: choice``, e.g. NeQA). Every choice is scored by
  the summed log-likelihood of its tokens as the continuation of the benchmark's context
  (:func:`negtrain.models.continuation.continuation_logprobs`, token ids split as
  lm-evaluation-harness splits them, :mod:`negtrain.models.choice_inputs`); the prediction is the
  best choice, both raw and per character (``accuracy`` / ``accuracy_norm``). Evaluation only;
  the context is the benchmark's own (``model.prompt`` and chat templates do not apply).
- **Cloze probes** (``answer_type: cloze``: negated LAMA). A causal LM can only fill a blank that
  ends the sentence (nothing but ``.``, ``!`` or ``?`` after ``[MASK]``, in the affirmative, negated
  and misprimed cloze alike): its prediction is the next token after the text before the blank,
  and the gold object is the first token of " " + object there (split as
  :mod:`negtrain.models.choice_inputs` does). Other probes are reported as skipped
  (``n_skipped``), not scored. Evaluation only.
- **Label benchmarks** (e.g. TINAD's True/False). Each label is verbalised by the first sub-token
  of ``" " + label`` as it is split after other text (" True" -> "▁True" / "ĠTrue", see
  :func:`answer_token_id`). Prediction is
  one forward pass comparing the logits of those tokens: at the answer position for a causal LM
  (inputs left-padded, so it is the last position), at the first decoder step for a seq2seq model.
  The higher logit wins. Training: cross-entropy on that answer token (causal: prompt tokens may
  get a small weight, ``model.prompt_loss_weight``; seq2seq: the target is the answer token + EOS).

Seq2seq inputs are right-padded and truncated at ``model.max_length`` (T5 appends EOS).
Causal inputs are left-padded with explicit position ids, so left padding changes nothing; a prompt
longer than allowed keeps its BOS and its end (where the question is). A causal tokenizer without
a pad token (Llama) pads with EOS; padding is masked out everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.benchmarks.negated_probes import MASK
from negtrain.config import ModelConfig, to_dict
from negtrain.data.collate import IGNORE
from negtrain.data.encoded import EncodedSplit, cached, fingerprint
from negtrain.data.module import EvalSet, NegtrainData, TrainSet
from negtrain.errors import ConfigError
from negtrain.metrics.base import ExampleMetric
from negtrain.metrics.cloze import NOT_IN_SPACE, SKIPPED, NegatedLamaMetric, spearman
from negtrain.metrics.multiple_choice import choose
from negtrain.models.adapters import add_adapter, load_base
from negtrain.models.base import NegtrainModule
from negtrain.models.choice_inputs import encode_choices, split_pair
from negtrain.models.contract import Built
from negtrain.models.continuation import continuation_logprobs
from negtrain.models.freezing import freeze
from negtrain.models.sources import attention_kwargs, resolve_model_name


def normalize_unifiedqa(text: str) -> str:
    """UnifiedQA(-v2)'s input normalisation: lower-case, tabs/newlines to spaces, single spaces."""
    return re.sub(r"\s+", " ", str(text).replace("\t", " ").replace("\n", " ")).strip().lower()


def prompt_text(bench: Benchmark, example: Example, cfg: ModelConfig) -> str:
    template = cfg.prompt or bench.default_prompt
    if template is None:
        raise ConfigError(f"benchmark '{bench.name}' has no default prompt for a language model; set model.prompt")
    fields = bench.prompt_fields(example)
    if cfg.normalize_input == "unifiedqa":
        fields = {k: normalize_unifiedqa(v) for k, v in fields.items()}
    try:
        text = template.format(**fields)
    except (KeyError, IndexError) as exc:
        raise ConfigError(
            f"model.prompt: placeholder {exc} is not an input of benchmark '{bench.name}' "
            f"(its inputs: {', '.join('{' + n + '}' for n in bench.input_names)})"
        ) from None
    return normalize_unifiedqa(text) if cfg.normalize_input == "unifiedqa" else text


def target_text(example: Example, cfg: ModelConfig) -> str:
    return normalize_unifiedqa(example.label) if cfg.normalize_input == "unifiedqa" else example.label


ANSWER_CONTEXT = "Answer:"


def answer_token_id(tokenizer, word: str) -> int:
    """The first sub-token of ``" " + word`` as the tokenizer splits it after other text.

    Tokenized in context ("Answer: True" minus "Answer:"), so every tokenizer family gives its
    word-initial piece: "ĠTrue" (byte-level BPE), "▁True" (SentencePiece: T5, Llama), never a bare
    space piece. Falls back to the first non-blank piece of " True" on its own.
    """
    head = tokenizer.encode(ANSWER_CONTEXT, add_special_tokens=False)
    full = tokenizer.encode(f"{ANSWER_CONTEXT} {word}", add_special_tokens=False)
    if full[: len(head)] == head and len(full) > len(head) and tokenizer.decode(full[len(head) : len(head) + 1]).strip():
        return full[len(head)]
    for token in tokenizer.encode(" " + word, add_special_tokens=False):
        if tokenizer.decode([token]).strip():
            return token
    raise ConfigError(f"the tokenizer has no token for answer word '{word}'")


def verbalizer_ids(tokenizer, bench: Benchmark) -> torch.Tensor:
    ids = [answer_token_id(tokenizer, label) for label in bench.labels]
    if len(set(ids)) != len(ids):
        raise ConfigError(
            f"benchmark '{bench.name}': the labels {list(bench.labels)} share a first sub-token "
            f"({[tokenizer.decode([i]) for i in ids]}), so a single forward pass cannot tell them apart"
        )
    return torch.tensor(ids, dtype=torch.long)


def _key(kind: str, tokenizer, cfg: ModelConfig, *texts: Sequence[str]) -> str:
    return fingerprint(
        kind,
        type(tokenizer).__name__,
        str(tokenizer.name_or_path),
        str(len(tokenizer)),
        str(getattr(tokenizer, "chat_template", None) if cfg.chat_template else None),
        str(cfg.max_length),
        str(cfg.max_target_length),
        *texts,
    )


# ---------------------------------------------------------------------------------------------
# Encoding


def causal_prompt_ids(tokenizer, prompts: Sequence[str], cfg: ModelConfig) -> list[list[int]]:
    if cfg.chat_template and getattr(tokenizer, "chat_template", None):
        texts = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
            for p in prompts
        ]
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    return tokenizer(list(prompts))["input_ids"]


def _fit(prompt: list[int], limit: int, bos: int | None) -> list[int]:
    if len(prompt) <= limit:
        return prompt
    if bos is not None and prompt and prompt[0] == bos:
        return prompt[:1] + prompt[len(prompt) - (limit - 1) :]
    return prompt[len(prompt) - limit :]


def causal_answer_ids(tokenizer, bench: Benchmark, examples: Sequence[Example], cfg: ModelConfig) -> list[list[int]]:
    if not bench.generative:
        return [[answer_token_id(tokenizer, e.label)] for e in examples]
    ids = tokenizer([" " + target_text(e, cfg) for e in examples], add_special_tokens=False)["input_ids"]
    return [x[: cfg.max_target_length - 1] + [tokenizer.eos_token_id] for x in ids]


def encode_causal_eval(tokenizer, bench: Benchmark, examples: Sequence[Example], cfg: ModelConfig) -> EncodedSplit:
    prompts = [prompt_text(bench, e, cfg) for e in examples]

    def build() -> EncodedSplit:
        ids = causal_prompt_ids(tokenizer, prompts, cfg)
        room = cfg.max_length - (cfg.max_new_tokens if bench.generative else 1)
        return EncodedSplit.from_lists([_fit(x, max(room, 2), tokenizer.bos_token_id) for x in ids], None)

    return cached(_key("causal-eval", tokenizer, cfg, prompts), build)


def encode_causal_train(tokenizer, bench, examples, cfg) -> tuple[EncodedSplit, torch.Tensor]:
    prompts = [prompt_text(bench, e, cfg) for e in examples]
    answers = causal_answer_ids(tokenizer, bench, examples, cfg)
    answer_len = torch.tensor([len(a) for a in answers], dtype=torch.long)

    def build() -> EncodedSplit:
        ids = causal_prompt_ids(tokenizer, prompts, cfg)
        seqs = [_fit(p, max(cfg.max_length - len(a), 2), tokenizer.bos_token_id) + a for p, a in zip(ids, answers)]
        return EncodedSplit.from_lists(seqs, None)

    key = _key("causal-train", tokenizer, cfg, prompts, [" ".join(map(str, a)) for a in answers])
    return cached(key, build), answer_len


def encode_seq2seq_eval(tokenizer, bench, examples, cfg) -> EncodedSplit:
    prompts = [prompt_text(bench, e, cfg) for e in examples]

    def build() -> EncodedSplit:
        return EncodedSplit.from_lists(tokenizer(prompts, truncation=True, max_length=cfg.max_length)["input_ids"], None)

    return cached(_key("seq2seq-eval", tokenizer, cfg, prompts), build)


def seq2seq_targets(tokenizer, bench, examples, cfg) -> list[list[int]]:
    if not bench.generative:
        return [[answer_token_id(tokenizer, e.label), tokenizer.eos_token_id] for e in examples]
    return tokenizer(text_target=[target_text(e, cfg) for e in examples], truncation=True, max_length=cfg.max_target_length)["input_ids"]


def choice_inputs(tokenizer, bench: Benchmark, examples: Sequence[Example], cfg: ModelConfig, causal: bool):
    """Context ids, per-choice continuation ids and choice lengths (characters) of a multiple-choice split."""
    contexts = [bench.context(e) for e in examples]
    options = [bench.choices(e) for e in examples]
    ctx, conts = encode_choices(tokenizer, contexts, options, bench.target_delimiter, causal, cfg.max_length)
    chars = torch.tensor([[len(o) for o in opts] for opts in options], dtype=torch.float64)
    return ctx, conts, chars


CLOZE_ENDINGS = ("", ".", "!", "?")


def cloze_prefix(text: str) -> str | None:
    """The text before a cloze's blank when the blank ends the sentence, else None."""
    before, after = text.split(MASK, 1)
    return before.rstrip() if after.strip() in CLOZE_ENDINGS and before.strip() else None


def cloze_prefixes(tokenizer, examples: Sequence[Example]) -> list[list[list[int]] | None]:
    out = []
    for e in examples:
        texts = [cloze_prefix(t) for t in e.inputs]
        out.append(None if any(t is None for t in texts) else [tokenizer(t)["input_ids"] for t in texts])
    return out


def cloze_metric(tokenizer, examples: Sequence[Example]):
    """The negated-LAMA metric with gold objects and primes as next-token vocabulary ids."""
    gold, primes = [], []
    for e in examples:
        aff, mis = cloze_prefix(e.inputs[0]), cloze_prefix(e.inputs[2])
        if aff is None or mis is None:
            gold.append(NOT_IN_SPACE)
            primes.append([])
            continue
        gold.append(split_pair(tokenizer, aff, " " + e.label, causal=True)[1][0])
        words = {e.meta["prime"], e.meta["prime"].lower()} - {""}
        conts = [split_pair(tokenizer, mis, " " + w, causal=True)[1] for w in words]
        primes.append(sorted({c[0] for c in conts if len(c) == 1}))
    note = "causal LM: only probes whose blank ends the sentence are scored (next token); multi-token objects by their first token"
    return NegatedLamaMetric(gold, primes, [e.subset for e in examples], [e.group for e in examples], note=note)


def encode_cloze_prefixes(tokenizer, examples: Sequence[Example]) -> EncodedSplit:
    fallback = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
    return EncodedSplit.from_lists([p[0] if p is not None else fallback for p in cloze_prefixes(tokenizer, examples)], None)


def encode_choice_contexts(tokenizer, bench, examples, cfg, causal: bool) -> EncodedSplit:
    ctx, _, _ = choice_inputs(tokenizer, bench, examples, cfg, causal)
    return EncodedSplit.from_lists(ctx, None)


def padded(rows: Sequence[Sequence[int]], value: int = IGNORE) -> torch.Tensor:
    width = max((len(r) for r in rows), default=1)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


# ---------------------------------------------------------------------------------------------
# Modules


class LMModule(NegtrainModule):
    """What both LM families share: per eval set, generate text or score label words."""

    def __init__(
        self,
        model,
        tokenizer,
        config: ModelConfig,
        eval_sets: Sequence[Any],
        metrics: Sequence[ExampleMetric],
        recipe: dict[str, Any],
    ) -> None:
        super().__init__(config, [s.name for s in eval_sets], metrics, recipe)
        self.model = model.train()
        self.pad_id = tokenizer.pad_token_id
        self.eos_id = tokenizer.eos_token_id
        self._decode = tokenizer.batch_decode  # generated ids -> answer text
        self.eval_benchmarks = [(s.benchmark, s.examples) for s in eval_sets]
        #: Multiple-choice eval sets: index -> (context ids, choice ids, choice lengths in characters).
        self.choice_inputs: dict[int, tuple[list[list[int]], list[list[list[int]]], torch.Tensor]] = {}
        #: Cloze eval sets (causal only): index -> per example (three prefixes or None if skipped).
        self.cloze_prefixes: dict[int, list[list[list[int]] | None]] = {}
        for i, s in enumerate(eval_sets):
            if s.benchmark.answer_type == "cloze":
                self.cloze_prefixes[i] = cloze_prefixes(tokenizer, s.examples)
            elif s.benchmark.answer_type == "choice":
                self.choice_inputs[i] = choice_inputs(tokenizer, s.benchmark, s.examples, config, self.causal)
            elif not s.benchmark.generative:
                self.register_buffer(f"verbalizers_{i}", verbalizer_ids(tokenizer, s.benchmark), persistent=False)

    def label_logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, vocab) logits of the answer position."""
        raise NotImplementedError

    def generate_texts(self, batch: dict[str, torch.Tensor]) -> list[str]:
        raise NotImplementedError

    causal: bool = False

    def predict(self, batch: dict[str, torch.Tensor], eval_index: int) -> torch.Tensor:
        bench, examples = self.eval_benchmarks[eval_index]
        if eval_index in self.choice_inputs:
            return self.predict_choices(batch["index"], eval_index)
        if eval_index in self.cloze_prefixes:
            return self.predict_cloze(batch["index"], eval_index)
        if not bench.generative:
            words = getattr(self, f"verbalizers_{eval_index}")
            return self.label_logits(batch)[:, words].argmax(-1)  # verbalizers are in label order
        texts = self.generate_texts(batch)
        store = self.eval_texts.setdefault(eval_index, {})
        right = []
        for idx, text in zip(batch["index"].tolist(), texts):
            store[idx] = text
            right.append(int(bench.is_correct(text, examples[idx])))
        return torch.tensor(right, dtype=torch.long, device=batch["index"].device)

    def predict_choices(self, index: torch.Tensor, eval_index: int) -> torch.Tensor:
        """(B, 2): the acc choice and the acc_norm choice of each question in the batch."""
        contexts, choices, chars = self.choice_inputs[eval_index]
        rows = index.tolist()
        scores = continuation_logprobs(
            self.model, [contexts[i] for i in rows], [choices[i] for i in rows],
            encoder_decoder=not self.causal, pad_id=self.pad_id,
        )
        return choose(scores.logprob, chars[rows]).to(index.device)

    @torch.no_grad()
    def predict_cloze(self, index: torch.Tensor, eval_index: int) -> torch.Tensor:
        """(B, 4) rows of :class:`negtrain.metrics.cloze.NegatedLamaMetric`: next-token top-1 after
        the affirmative, negated and misprimed prefix, and the Spearman correlation of the
        affirmative and negated next-token scores; SKIPPED rows where the blank is not final."""
        prefixes = self.cloze_prefixes[eval_index]
        rows = index.tolist()
        out = torch.full((len(rows), 4), float(SKIPPED), dtype=torch.float64)
        out[:, 3] = float("nan")
        scored = [r for r, i in enumerate(rows) if prefixes[i] is not None]
        if scored:
            seqs = [p for r in scored for p in prefixes[rows[r]]]
            ids = padded(seqs, self.pad_id).to(index.device)
            mask = padded([[1] * len(x) for x in seqs], 0).to(index.device)
            logits = self.model(input_ids=ids, attention_mask=mask).logits
            last = logits[torch.arange(len(seqs), device=ids.device), mask.sum(1) - 1].float().view(len(scored), 3, -1)
            tops = last.argmax(-1).to(torch.float64).cpu()
            rho = spearman(last[:, 0], last[:, 1]).cpu()
            out[scored] = torch.cat([tops, rho.unsqueeze(1)], dim=1)
        return out.to(index.device)

    def _generate_kwargs(self) -> dict[str, Any]:
        return dict(
            max_new_tokens=self.config.max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_id,
        )


class Seq2SeqModule(LMModule):
    def __init__(self, *args, decoder_start_token_id: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decoder_start_token_id = decoder_start_token_id

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        labels = batch["labels"]
        labels = labels[:, : int((labels != IGNORE).sum(1).max())].contiguous()
        return self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss

    def label_logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        start = torch.full((len(batch["input_ids"]), 1), self.decoder_start_token_id, device=batch["input_ids"].device)
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], decoder_input_ids=start)
        return out.logits[:, 0]

    def generate_texts(self, batch: dict[str, torch.Tensor]) -> list[str]:
        out = self.model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **self._generate_kwargs())
        return [t.strip() for t in self._decode(out, skip_special_tokens=True)]


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


class CausalLMModule(LMModule):
    causal = True

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask = batch["input_ids"], batch["attention_mask"]
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask)).logits
        logits, targets = logits[:, :-1].float(), ids[:, 1:]
        # Left-padded: the answer is the last answer_len tokens of each row.
        width = ids.shape[1]
        col = torch.arange(1, width, device=ids.device).unsqueeze(0)
        is_answer = col >= (width - batch["answer_len"]).unsqueeze(1)
        real = (mask[:, 1:] * mask[:, :-1]).bool()  # a target and its context are both real tokens
        weight = torch.where(is_answer, 1.0, self.config.prompt_loss_weight) * real
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        return (ce * weight.reshape(-1)).sum() / weight.sum()

    def label_logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = batch["attention_mask"]
        out = self.model(input_ids=batch["input_ids"], attention_mask=mask, position_ids=_positions(mask))
        return out.logits[:, -1]  # left-padded: the last position predicts the answer

    def generate_texts(self, batch: dict[str, torch.Tensor]) -> list[str]:
        ids = batch["input_ids"]
        out = self.model.generate(input_ids=ids, attention_mask=batch["attention_mask"], **self._generate_kwargs())
        return [t.strip() for t in self._decode(out[:, ids.shape[1] :], skip_special_tokens=True)]


# ---------------------------------------------------------------------------------------------
# Builders (see negtrain.models.families)


def _build_lm(recipe, loaded, family: str):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    cfg = recipe.model
    causal = family == "causal_lm"
    path = resolve_model_name(cfg.name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"model '{cfg.name}': the tokenizer has no EOS token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if causal:
        encode_eval = encode_causal_eval
    else:
        encode_eval = encode_seq2seq_eval
    for b, split, _ in loaded.train:
        if b.answer_type == "choice" or b.open_vocabulary:
            raise ConfigError(f"data.train: {b.name}/{split} is an evaluation probe; a {family} model cannot train on it")
    for b, split, _ in loaded.eval:
        if b.open_vocabulary and not (causal and b.answer_type == "cloze"):
            raise ConfigError(
                f"data.eval: {b.name}/{split} is a masked-LM probe; score it with model.family mlm"
                + (" (or causal_lm for negated_lama)" if b.answer_type == "cloze" else "")
            )

    def encode(b, ex):
        if b.answer_type == "cloze":
            return encode_cloze_prefixes(tokenizer, ex)
        if b.answer_type == "choice":
            return encode_choice_contexts(tokenizer, b, ex, cfg, causal)
        return encode_eval(tokenizer, b, ex, cfg)

    eval_sets = [EvalSet(b, split, ex, encode(b, ex)) for b, split, ex in loaded.eval]
    metrics = [cloze_metric(tokenizer, s.examples) if s.benchmark.answer_type == "cloze" else s.benchmark.metric(s.examples) for s in eval_sets]

    train = None
    if loaded.train:
        parts, extras = [], []
        for b, _, ex in loaded.train:
            if causal:
                enc, answer_len = encode_causal_train(tokenizer, b, ex, cfg)
                parts.append(enc)
                extras.append(answer_len)
            else:
                parts.append(encode_seq2seq_eval(tokenizer, b, ex, cfg))
                extras.extend(seq2seq_targets(tokenizer, b, ex, cfg))
        train = TrainSet(
            encoded=EncodedSplit.concat(parts),
            extras={"answer_len": torch.cat(extras)} if causal else {"labels": padded(extras)},
            sources=[f"{b.name}/{split}" for b, split, _ in loaded.train],
            source_sizes=[len(ex) for _, _, ex in loaded.train],
        )

    auto = AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM
    model = load_base(auto, path, recipe.adapter, **attention_kwargs(cfg))
    model = add_adapter(model, recipe.adapter, "CAUSAL_LM" if causal else "SEQ_2_SEQ_LM")
    freeze(model, cfg)
    if causal:
        module = CausalLMModule(model, tokenizer, cfg, eval_sets, metrics, recipe=to_dict(recipe))
    else:
        start = AutoConfig.from_pretrained(path).decoder_start_token_id
        if start is None:
            start = tokenizer.pad_token_id
        module = Seq2SeqModule(model, tokenizer, cfg, eval_sets, metrics, recipe=to_dict(recipe), decoder_start_token_id=start)
    data = NegtrainData(recipe.data, recipe.seed, tokenizer.pad_token_id, train, eval_sets, pad_left=causal)
    return Built(module, data, tokenizer)


def build_seq2seq(recipe, loaded):
    return _build_lm(recipe, loaded, "seq2seq")


def build_causal_lm(recipe, loaded):
    return _build_lm(recipe, loaded, "causal_lm")
