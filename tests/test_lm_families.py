"""The seq2seq and causal-LM families: prompts, True/False scoring, training, end to end.

Tiny T5 / Llama-style models with genuine tokenizers trained offline (see tiny_models.py).
"""

from __future__ import annotations

import json
import pytest
import torch

from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import ConfigError
from negtrain.recipes import load_recipe
from negtrain.training.build import build
from negtrain.training.run import fit
from tiny_models import write_recipe


def _recipe(model, family, **model_extra):
    return {
        "description": "tiny end-to-end test",
        "model": {"name": str(model), "family": family, "max_length": 64, "learning_rate": 1e-3, "max_new_tokens": 3, **model_extra},
        "data": {
            "train": [{"benchmark": "condaqa", "split": "dev"}, {"benchmark": "tinad", "split": "train"}],
            "eval": [{"benchmark": "tinad", "split": "validation"}, {"benchmark": "condaqa", "split": "dev"}],
            "batch_size": 8,
            "eval_batch_size": 8,
        },
        "trainer": {"max_epochs": 1, "limit_train_batches": 3, "limit_val_batches": 3, "enable_progress_bar": False, "accelerator": "cpu", "torch_threads": 1},
        "selection": {"metric": "tinad/validation/coherence"},
    }


def test_unifiedqa_input_format():
    from negtrain.benchmarks.base import Example
    from negtrain.config import model_config
    from negtrain.models.prompting import prompt_text, target_text

    bench = get_benchmark("condaqa")
    ex = Example("condaqa/dev/1", ("The Cat\tsat.\nIt did  NOT move.", "Did it move?"), "NO")
    cfg = model_config(name="x", family="seq2seq", normalize_input="unifiedqa")
    assert prompt_text(bench, ex, cfg) == "the cat sat. it did not move. \\n did it move?"
    assert target_text(ex, cfg) == "no"
    tinad = get_benchmark("tinad")
    ex2 = Example("tinad/x/0", ("A dog is an animal.",), "True")
    assert prompt_text(tinad, ex2, model_config(name="x", family="seq2seq")) == "Is the following statement True or False? A dog is an animal."
    with pytest.raises(ConfigError, match=r"placeholder 'question' is not an input of benchmark 'tinad'"):
        prompt_text(tinad, ex2, model_config(name="x", family="seq2seq", prompt="{question}"))


def _module(lm_env, tmp_path, key, family, **extra):
    recipe = _recipe(lm_env[key], family, **extra)
    recipe["data"]["train"] = [{"benchmark": "tinad", "split": "train"}]
    recipe["data"]["eval"] = [{"benchmark": "tinad", "split": "validation"}]
    return build(load_recipe(str(write_recipe(tmp_path / "r.yaml", recipe))).recipe)


@pytest.mark.parametrize("key,family", [("llama", "causal_lm"), ("t5", "seq2seq")])
def test_true_false_scorer_picks_the_likelier_verbalizer(lm_env, tmp_path, key, family):
    """Each label is scored by its verbalizer's full continuation; the likelier one wins (the
    module's predict answers its eval set's requests through the engine)."""
    built = _module(lm_env, tmp_path, key, family)
    module, tok = built.module.eval(), built.tokenizer
    requests = module.eval_sets[0].requests
    rows = list(range(6))
    with torch.no_grad():
        predicted = module.predict({"index": torch.tensor(rows)}, module.eval_sets[0]).tolist()
        by_hand = []
        for i in rows:
            true_req, false_req = requests.per_example[i]
            scores = []
            for req in (true_req, false_req):  # one full sequence per label, no sharing
                if family == "causal_lm":  # " True" as split after the prompt, no EOS
                    prompt = tok(req.context)["input_ids"]
                    cont = tok(req.context + req.continuation)["input_ids"][len(prompt):]
                    assert tok.decode(cont) in (" True", " False")
                    logits = module.model(input_ids=torch.tensor([prompt + cont])).logits[0]
                    lp = torch.log_softmax(logits.float(), -1)[torch.arange(len(prompt) - 1, len(prompt) + len(cont) - 1), cont]
                else:  # the decoder target, ending in EOS like the training targets
                    prompt = tok(req.context)["input_ids"]
                    cont = tok(text_target=req.continuation)["input_ids"]
                    assert tok.decode(cont) in ("True</s>", "False</s>")
                    dec = torch.tensor([[module.decoder_start_token_id, *cont[:-1]]])
                    logits = module.model(input_ids=torch.tensor([prompt]), decoder_input_ids=dec).logits[0]
                    lp = torch.log_softmax(logits.float(), -1)[torch.arange(len(cont)), cont]
                scores.append(float(lp.sum()))
            by_hand.append(int(scores[1] > scores[0]))
    assert predicted == by_hand


@pytest.mark.parametrize("key,family", [("llama_chat", "causal_lm"), ("t5", "seq2seq")])
def test_loss_goes_down_on_easy_fixture(lm_env, tmp_path, key, family):
    # prompt_loss_weight is a causal_lm setting (its default, 0.0: the loss is on the answer tokens)
    built = _module(lm_env, tmp_path, key, family, **({"prompt_loss_weight": 0.0, "chat_template": True} if family == "causal_lm" else {}))
    module = built.module
    if family == "causal_lm":  # the chat template was applied to the prompts
        first = built.data.train.encoded.input_ids[: built.data.train.encoded.offsets[1]].tolist()
        assert "[INST]" in built.tokenizer.decode(first) and "[/INST]" in built.tokenizer.decode(first)
    built.data.trainer = None
    built.data.set_limits(1.0, 1.0)  # every batch (the loaders apply the recipe's trainer limits)
    loader = built.data.train_dataloader()
    batches = list(loader)
    opt = torch.optim.AdamW(module.parameters(), lr=3e-3)
    torch.manual_seed(0)

    def mean_loss():
        with torch.no_grad():
            return sum(float(module.training_loss(b)) for b in batches) / len(batches)

    start = mean_loss()
    for _ in range(5):
        for b in batches:
            opt.zero_grad()
            module.training_loss(b).backward()
            opt.step()
    end = mean_loss()
    assert end < 0.5 * start, (start, end)


def test_causal_prompt_loss_weight_changes_the_loss(lm_env, tmp_path):
    b0 = _module(lm_env, tmp_path, "llama", "causal_lm", prompt_loss_weight=0.0)
    b1 = _module(lm_env, tmp_path, "llama", "causal_lm", prompt_loss_weight=0.1)
    b1.module.model.load_state_dict(b0.module.model.state_dict())
    b0.data.trainer = b1.data.trainer = None
    batch = next(iter(b0.data.train_dataloader()))
    answer_only = float(b0.module.training_loss(batch))
    # By hand: the answer (the gold verbalizer's full continuation, " True" / " False") is the
    # last answer_len tokens of every row (left padding); the loss is their mean cross-entropy.
    logits = b0.module.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    losses = []
    for row, n in enumerate(batch["answer_len"].tolist()):
        width = batch["input_ids"].shape[1]
        for pos in range(width - n, width):
            losses.append(float(torch.nn.functional.cross_entropy(logits[row, pos - 1].float()[None], batch["input_ids"][row, pos][None])))
    assert answer_only == pytest.approx(sum(losses) / len(losses), rel=1e-4)
    # What the loss averages over (DDP weights each rank's share of a step by it): the answer tokens.
    assert int(b0.module.loss_units(batch)) == int(batch["answer_len"].sum()) == len(losses)
    assert float(b1.module.training_loss(batch)) != pytest.approx(answer_only, rel=1e-3)


@pytest.mark.parametrize("key,family", [("t5", "seq2seq"), ("llama_chat", "causal_lm")])
def test_tiny_model_end_to_end(lm_env, tmp_path, key, family):
    recipe = write_recipe(tmp_path / "r.yaml", _recipe(lm_env[key], family, normalize_input="unifiedqa" if family == "seq2seq" else "none"))
    run = fit(load_recipe(str(recipe)), tmp_path / "run")
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    by_bench = {r["benchmark"]: r for r in records}
    assert set(by_bench) == {"tinad", "condaqa", "train"}
    assert by_bench["train"]["global_step"] == 3 and by_bench["train"]["metrics"]["loss"] > 0
    assert by_bench["tinad"]["metrics"]["n"] == 24 and by_bench["tinad"]["metrics"]["groups_scored"] == 6
    assert 0 <= by_bench["tinad"]["metrics"]["coherence"] <= 1
    assert by_bench["condaqa"]["metrics"]["n"] == 24
    condaqa = [json.loads(line) for line in (run / "predictions" / "condaqa-dev-epoch0.jsonl").read_text().splitlines()]
    assert len(condaqa) == 24 and all(isinstance(r["prediction"], str) for r in condaqa)
    right = sum(r["prediction"].strip().lower() == r["label"].strip().lower() for r in condaqa)
    assert by_bench["condaqa"]["metrics"]["accuracy"] == pytest.approx(right / 24)
    tinad = [json.loads(line) for line in (run / "predictions" / "tinad-validation-epoch0.jsonl").read_text().splitlines()]
    assert {r["prediction"] for r in tinad} <= {"True", "False"} and len(tinad) == 24
    assert by_bench["tinad"]["metrics"]["accuracy"] == pytest.approx(sum(r["prediction"] == r["label"] for r in tinad) / 24)
    assert (run / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize("key,family", [("llama", "causal_lm"), ("t5", "seq2seq")])
def test_lora_on_language_models_trains_only_adapters(lm_env, tmp_path, key, family):
    recipe = _recipe(lm_env[key], family)
    recipe["data"]["train"] = [{"benchmark": "tinad", "split": "train"}]
    recipe["data"]["eval"] = [{"benchmark": "tinad", "split": "validation"}, {"benchmark": "condaqa", "split": "dev"}]
    recipe["adapter"] = {"type": "lora", "r": 4, "alpha": 8, "target_modules": "all-linear"}
    built = build(load_recipe(str(write_recipe(tmp_path / "r.yaml", recipe))).recipe)
    module = built.module
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    built.data.trainer = None
    opt = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-2)
    for batch in list(built.data.train_dataloader())[:3]:
        opt.zero_grad()
        module.training_loss(batch).backward()
        opt.step()
    changed = {n for n, p in module.named_parameters() if not torch.equal(before[n], p.detach())}
    assert changed and all("lora_" in n for n in changed)
    module.eval()
    with torch.no_grad():
        tf = next(iter(built.data.val_dataloader()[0]))
        assert set(module.predict(tf, module.eval_sets[0]).tolist()) <= {0, 1}
        gen = next(iter(built.data.val_dataloader()[1]))
        gen = {k: v[:2] for k, v in gen.items()}
        assert module.predict(gen, module.eval_sets[1]).shape == (2,) and len(module.eval_texts[module.eval_sets[1].name]) == 2


@pytest.mark.parametrize("key,family", [("llama", "causal_lm"), ("t5", "seq2seq")])
def test_padding_does_not_change_predictions(lm_env, tmp_path, key, family):
    """Batched (padded) scoring and generation equal one-example-at-a-time results."""
    from negtrain.engine.requests import Counts

    recipe = _recipe(lm_env[key], family, max_length=400)
    recipe["data"]["eval"] = [{"benchmark": "tinad", "split": "validation"}, {"benchmark": "condaqa", "split": "dev"}]
    built = build(load_recipe(str(write_recipe(tmp_path / "r.yaml", recipe))).recipe)
    module = built.module.eval()
    backend = module.__dict__["backend"]
    backend.model = module.model
    for i, eval_set in enumerate(built.data.eval_sets):
        requests = eval_set.requests
        lengths = [len(built.tokenizer(r.prompt if i else r.context)["input_ids"]) for r in requests.requests(range(len(eval_set.examples)))]
        if i == 0:
            lengths = lengths[::2]  # two labels per row: the row's prompt length once
        idx = [lengths.index(min(lengths)), lengths.index(max(lengths)), 3, 7]
        assert len({lengths[j] for j in idx}) > 1  # the batch really is padded
        with torch.no_grad():
            batched = backend.answer(requests.requests(idx), Counts())
            single = [a for j in idx for a in backend.answer(requests.requests([j]), Counts())]
        if i == 0:
            assert torch.allclose(torch.tensor([a.logprob for a in batched]), torch.tensor([a.logprob for a in single]), atol=1e-4)
        else:
            assert [a.text for a in batched] == [a.text for a in single]


@pytest.mark.parametrize("key,family", [("llama", "causal_lm"), ("t5", "seq2seq")])
def test_training_on_a_label_benchmark_targets_its_verbalizer(lm_env, tmp_path, key, family):
    """Training uses the entry's verbalizer (the same texts evaluation scores), in full."""
    recipe = _recipe(lm_env[key], family)
    verbalizer = {"entailment": "not sure", "not_entailment": "not at all"}
    recipe["data"]["train"] = [{"benchmark": "scone", "split": "test", "verbalizer": verbalizer}]
    recipe["data"]["eval"] = [{"benchmark": "scone", "split": "test", "verbalizer": verbalizer}]
    recipe["selection"] = {"metric": "scone/test/accuracy"}
    built = build(load_recipe(str(write_recipe(tmp_path / "r.yaml", recipe))).recipe)
    tok, train = built.tokenizer, built.data.train
    gold = [e.label for e in get_benchmark("scone").load("test")]
    requests = built.module.eval_sets[0].requests
    for i in (0, 1, len(gold) - 1):
        scored = requests.per_example[i][get_benchmark("scone").labels.index(gold[i])].continuation  # what evaluation scores
        if family == "causal_lm":
            seq = train.encoded.input_ids[train.encoded.offsets[i] : train.encoded.offsets[i + 1]].tolist()
            n = int(train.extras["answer_len"][i])
            assert tok.decode(seq[-n:]) == scored == " " + verbalizer[gold[i]]
        else:
            row = train.extras["labels"][i]
            assert tok.decode(row[row != -100].tolist()) == scored + "</s>" == verbalizer[gold[i]] + "</s>"


@pytest.mark.parametrize("key,family", [("llama", "causal_lm"), ("t5", "seq2seq")])
def test_bf16_near_ties_are_rescored_in_fp32(lm_env, tmp_path, key, family):
    """The module's backend under bf16 autocast rescored in fp32 where labels are near a tie."""
    from negtrain.engine.requests import Counts

    built = _module(lm_env, tmp_path, key, family)
    module = built.module.eval()
    backend = module.__dict__["backend"]
    backend.model = module.model
    requests = module.eval_sets[0].requests.requests(range(6))

    def logprobs():
        with torch.no_grad():
            return torch.tensor([a.logprob for a in backend.answer(requests, Counts())])

    fp32 = logprobs()
    backend.autocast_dtype, backend.fp32_recheck_margin = torch.bfloat16, None
    bf16 = logprobs()
    backend.fp32_recheck_margin = 1e9  # every row is a near-tie: all rescored
    rechecked = logprobs()
    assert not torch.allclose(bf16, fp32, atol=1e-4)  # bf16 really rounds differently
    assert torch.allclose(rechecked, fp32, atol=1e-5)
