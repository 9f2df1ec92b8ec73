"""Prompt strategies, answer rules, generation and protocols (LLM evaluation as the papers define it).

The expected prompts below are typed from the ScoNe paper (She et al. 2023, Appendix E), with
the paper's \\n marks as newlines, independently of negtrain/prompts/scone.yaml: a change to a
strategy file that departs from the paper fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from negtrain.core.errors import ConfigError
from negtrain.evaluation.predictions import score_file
from negtrain.prompts.answers import contains_yes, first_label_word, so_the_answer_is, answer_rule
from negtrain.prompts.protocols import get_protocol, parse_protocols
from negtrain.prompts.strategies import get_strategy, parse_strategies



def _scone_rows(split="test"):
    """The mirrored ScoNe rows; the tests that read them ask for ``data_dir``, which fails without the
    mirror instead of skipping (a skip here passed the paper's prompts unchecked)."""
    return get_benchmark("scone").load(split)


def _fields(example):
    return get_benchmark("scone").prompt_fields(example)


# ---- prompts against the paper -------------------------------------------------------------


def _as_embedded(sentence):
    """A row as E.2, E.4 and E.6 embed it: first letter lowered, final period dropped."""
    return (sentence[:1].lower() + sentence[1:]).removesuffix(".")


def test_zero_shot_prompts_are_appendix_e_with_the_row_put_in(data_dir):
    rows = [e for e in _scone_rows() if e.id in ("scone/test/one_scoped/0", "scone/test/no_negation/1", "scone/test/two_scoped/5")]
    assert len(rows) == 3
    assert rows[-1].inputs[0] == "The statement that the man does not own a pinscher is false."  # a capital and a period to remove
    for e in rows:
        p, h = (_as_embedded(s) for s in e.inputs)
        # E.1, E.3, E.5
        assert get_strategy("scone", "conditional_q").render(_fields(e)) == f"Is it true that if {p}, then {h}?"
        assert get_strategy("scone", "hypothesis_q").render(_fields(e)) == f"Assume that {p}. Is it then definitely true that {h}? Answer Yes or No."
        assert get_strategy("scone", "conditional_truth").render(_fields(e)) == f"If {p}, then {h}. Is this true?"
    e = next(x for x in rows if x.id == "scone/test/one_scoped/0")
    assert e.inputs == ("the man does not own a dog", "the man does not own a mammal")
    # E.7 and E.9 capitalise the sentences ("We didn't eat pizza").
    assert get_strategy("scone", "brown").render(_fields(e)) == "C: The man does not own a dog\nQ: The man does not own a mammal. Yes, No, or Maybe?"
    assert get_strategy("scone", "structured").render(_fields(e)) == "P: The man does not own a dog\nH: The man does not own a mammal\nL:"


E2 = (
    "Q1: Is it true that if a not so tall person reading a paper is not currently sitting inside a building, then a not so tall person reading a paper is not currently sitting inside a club?\n"
    "A1: Yes\n\n"
    "Q2: Is it true that if the man does not own a dog and does not own a cat, then the man does not own a retriever and does not own a cat?\n"
    "A2: Yes\n\n"
    "Q3: Is it true that if a not so tall person reading a paper is not currently sitting inside a cabin, then a not so tall person reading a paper is not currently sitting inside a building?\n"
    "A3: Maybe\n\n"
    "Q4: Is it true that if a not so tall person reading a paper is not currently sitting inside a casino, then a not so tall person reading a paper is not currently sitting inside a building? A4: Maybe\n\n"
)
E4 = (
    "Q1: Assume that a not so tall person reading a paper is not currently sitting inside a building. Is it then definitely true that a not so tall person reading a paper is not currently sitting inside a casino? Answer Yes or No.\n"
    "A1: Yes\n\n"
    "Q2: Assume that the girl will not get a stuffed dog as a gift, but not because she failed the exam. Is it then definitely true that the girl will not get a stuffed pinscher as a gift, but not because she failed the exam? Answer Yes or No.\n"
    "A2: Yes\n\n"
    "Q3: Assume that the girl will not get a stuffed shetland as a gift, but not because she failed the exam. Is it then definitely true that the girl will not get a stuffed dog as a gift, but not because she failed the exam? Answer Yes or No.\n"
    "A3: No\n\n"
    "Q4: Assume that a not so tall person reading a paper is not currently sitting inside a monastery. Is it then definitely true that a not so tall person reading a paper is not currently sitting inside a building? Answer Yes or No.\n"
    "A4: No\n\n"
)
E6 = (
    "C1: If the man does not own a dog and does not own a cat, then the man does not own a shetland and does not own a cat. Is this true?\n"
    "A1: Yes\n\n"
    "C2: If a not so tall person reading a paper is not currently sitting inside a building, then a not so tall person reading a paper is not currently sitting inside a house. Is this true?\n"
    "A2: Yes\n\n"
    "C3: If the man does not own a collie and does not own a cat, then the man does not own a dog and does not own a cat. Is this true?\n"
    "A3: Maybe\n\n"
    "C4: If the man does not own a corgi and does not own a cat, then the man does not own a dog and does not own a cat. Is this true?\n"
    "A4: Maybe\n\n"
)
INSTRUCTIONS = (
    "Logical and commonsense reasoning exam.\n\nExplain your reasoning in detail, then answer with Yes or No. Your answers should follow this 4-line format:\n\n"
    "Premise: <a tricky logical statement about the world>.\nQuestion: <question requiring logical deduction>.\n"
    "Reasoning: <an explanation of what you understand about the possible scenarios>.\nAnswer: <Yes or No>.\n\n"
)
E12_ONE_SCOPED = (
    "Here are some examples of the kind of reasoning you should do:\n\n\n"
    "Premise: The students didn't eat any pizza\nQuestion: Can we logically conclude for sure that the students didn't eat any food?\n"
    "Reasoning: Let's think logically step by step. The premise basically tells us that pizza is a type of food. Therefore, the premise that "
    "the students didn't eat any pizza does not allow us to conclude that the students didn't eat any food. They might have eaten something else.\nAnswer: No\n\n\n"
    "Premise: The students didn't eat any food\nQuestion: Can we logically conclude for sure that the students didn't eat any pizza?\n"
    "Reasoning: Let's think logically step by step. The premise basically tells us that pizza is a type of food. Therefore, the premise that "
    "the students didn't eat any food entails that the students didn't eat any pizza.\nAnswer: Yes\n\n"
)


def test_few_shot_prompts_hold_the_papers_demonstrations_verbatim_in_order(data_dir):
    e = next(x for x in _scone_rows() if x.id == "scone/test/one_scoped/0")
    p, h = e.inputs
    f = _fields(e)
    assert get_strategy("scone", "conditional_q").paper_prompt(f, e.subset).text() == E2 + f"Q: Is it true that if {p}, then {h}?\nA:"
    assert get_strategy("scone", "hypothesis_q").paper_prompt(f, e.subset).text() == E4 + f"Q: Assume that {p}. Is it then definitely true that {h}? Answer Yes or No.\nA:"
    assert get_strategy("scone", "conditional_truth").paper_prompt(f, e.subset).text() == E6 + f"C: If {p}, then {h}. Is this true?\nA:"
    # E.12: a one-scoped example gets the One Scoped pair, after the instructions, before the example.
    reasoning = get_strategy("scone", "reasoning")
    query = f"Premise: {p}\nQuestion: Can we logically conclude for sure that {h}?\nReasoning: Let's think logically step by step. The premise basically tells us that"
    assert reasoning.paper_prompt(f, "one_scoped").text() == INSTRUCTIONS + E12_ONE_SCOPED + query
    assert reasoning.render(f) == INSTRUCTIONS + query  # E.11
    no_neg = reasoning.paper_prompt(f, "no_negation").text()
    assert "Premise: The students ate pizza\n" in no_neg and "didn't eat any" not in no_neg


def test_multiturn_splits_demonstrations_into_alternating_turns():
    prompt = get_strategy("scone", "conditional_q").paper_prompt({"premise": "a", "hypothesis": "b"}, None)
    messages = prompt.messages(system="Be brief.", multiturn=True)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert messages[2]["content"] == "Yes" and messages[-1]["content"] == "Q: Is it true that if a, then b?\nA:"
    assert prompt.messages(multiturn=False) == [{"role": "user", "content": prompt.text()}]


def test_strategy_files_are_checked_with_did_you_mean():
    with pytest.raises(ConfigError, match="did you mean 'conditional_q'"):
        get_strategy("scone", "conditonal_q")
    with pytest.raises(ConfigError, match="unknown key 'templte'.*did you mean 'template'"):
        parse_strategies({"benchmark": "x", "strategies": {"s": {"templte": "{a}"}}}, "x.yaml")
    with pytest.raises(ConfigError, match="unknown answer rule 'contains_yess'.*did you mean 'contains_yes'"):
        parse_strategies({"benchmark": "x", "strategies": {"s": {"template": "{a}", "answer": {"rule": "contains_yess"}}}}, "x.yaml")
    with pytest.raises(ConfigError, match="shots"):
        parse_protocols({"p": {"variants": [{"name": "a", "benchmark": "scone", "split": "test", "strategy": "brown", "shots": "some"}]}}, "p.yaml")
    assert [v.name for v in get_protocol("scone-icl").variants][:2] == ["structured/zero", "brown/zero"]
    assert len(get_protocol("scone-icl").variants) == 12


# ---- answer rules ------------------------------------------------------------------------------


def test_contains_yes_is_the_papers_substring_rule():
    assert contains_yes("Yes.") == "yes"
    assert contains_yes("YES") == "yes"
    assert contains_yes("yesterday it rained") == "yes"  # the paper's substring rule, kept on purpose
    assert contains_yes("No, it is not.") == "no"
    assert contains_yes("") == "no"
    assert contains_yes("%%%") == "no"  # contains_yes never leaves a response unparsed


def test_first_label_word_takes_the_earliest_whole_word():
    words = ["True", "False"]
    assert first_label_word("False. It is True that ...", words) == "False"
    assert first_label_word("true", words) == "True"
    assert first_label_word("Untrue!", words) is None  # a whole word only
    assert first_label_word("I cannot say.", words) is None
    assert first_label_word("not entailment", ["not", "not entailment"]) == "not entailment"


def test_so_the_answer_is_reads_condaqas_chain_of_thought_forms():
    assert so_the_answer_is("The passage says he left. So the answer is YES.") == "YES"
    assert so_the_answer_is("He never came back, so the answer is don't know.\nQ: next") == "don't know"
    assert so_the_answer_is("Reasoning... The final answer is no.") == "no"
    assert so_the_answer_is("Reasoning... (final) answer: Yes") == "Yes"
    assert so_the_answer_is("Answer is \"the castle\".") == "the castle"
    assert so_the_answer_is("The passage does not say.") is None
    assert so_the_answer_is("So the answer is") is None
    assert so_the_answer_is("So the answer is no.", ["yes", "no", "don't know"]) == "no"


def test_regex_rule_and_unknown_rules():
    rule = answer_rule(r"regex:label:\s*(\w+)")
    assert rule("the label: Entailment here", ["entailment", "neutral"]) == "entailment"
    assert rule("no label", ["entailment"]) is None
    assert rule("label: banana", ["entailment"]) is None
    with pytest.raises(ConfigError, match="not a regular expression"):
        answer_rule("regex:(")


# ---- a protocol run on a tiny random causal LM ----------------------------------------------


def _records(out: Path):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_protocol_scone_icl_writes_12_variants_each_scored_from_its_own_lines(lm_env, tmp_path):
    out = tmp_path / "icl"
    code = main([
        "evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--protocol", "scone-icl", "--out", str(out),
        "--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1", "--trainer.precision=32-true",
        "--evaluation.bootstrap=20",
    ])
    assert code == 0
    records = _records(out)
    protocol = get_protocol("scone-icl")
    assert [r["variant"] for r in records] == [v.name for v in protocol.variants]
    strategy_of = {v.name: v.strategy for v in protocol.variants}
    for r in records:
        path = out / "predictions" / f"scone-test-{r['variant'].replace('/', '-')}.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert len(lines) == r["metrics"]["n"] == 6  # one batch of 4 rows: one whole contrast set (a limit keeps whole sets)
        strategy = get_strategy("scone", strategy_of[r["variant"]])
        for line in lines:
            assert isinstance(line["response"], str) and line["prompt"]
            # The reference rule: entailment when the response contains "yes", else not_entailment.
            expected = "entailment" if "yes" in line["response"].lower() else "not_entailment"
            assert line["prediction"] == expected
            if r["variant"].endswith("/few"):
                assert line["shots"] and all(s.startswith("paper:") for s in line["shots"])
                assert strategy.fewshot.for_subset(line["id"].split("/")[2], "")[0][0] in line["prompt"]
        # Reference recomputation from the lines alone.
        reference = tmp_path / "ref.jsonl"
        reference.write_text("".join(json.dumps({"id": x["id"], "prediction": contains_yes(x["response"]) == "yes" and "entailment" or "not_entailment"}) + "\n" for x in lines))
        scored = score_file("scone", "test", reference, allow_missing=True, bootstrap=0)
        for key, value in scored.metrics.items():
            got = r["metrics"][key]
            assert (got is None and value != value) or got == pytest.approx(value), (r["variant"], key)
        assert r["metrics"]["n_unparsed"] == 0 and r["tokens_generated"] > 0
    table = (out / "protocol.md").read_text()
    assert "| Ignore-Negation | 1.00" in table and "| reasoning/few † |" in table
    assert table.count("\n| ") == 1 + 12 + 1  # header, the variants, the baseline
    assert "tokens generated" in (out / "card.md").read_text()


def test_chat_template_wraps_every_prompt_and_a_model_without_one_exits_2(lm_env, tmp_path, capsys, monkeypatch):
    out = tmp_path / "chat"
    code = main([
        "evaluate", "--model", str(lm_env["llama_chat"]), "--family", "causal_lm", "--benchmarks", "scone", "--strategy", "conditional_q",
        "--chat", "--system", "Answer briefly.", "--out", str(out), "--trainer.limit_val_batches=1", "--data.eval_batch_size=4",
        "--trainer.torch_threads=1", "--trainer.precision=32-true", "--evaluation.bootstrap=0",
    ])
    assert code == 0
    line = json.loads((out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()[0])
    assert line["prompt"].startswith("<s>[INST] Answer briefly.[/INST]") or line["prompt"].startswith("<s>[INST] Answer briefly. [/INST]")
    assert "[INST] Is it true that if " in line["prompt"]
    # No chat template: an error line and exit 2, before the weights are loaded.
    import negtrain.models.lm as lm

    def no_loading(*args, **kwargs):
        raise AssertionError("the weights were loaded before --chat was checked")

    monkeypatch.setattr(lm, "load_base", no_loading)
    capsys.readouterr()
    code = main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--benchmarks", "scone", "--chat", "--out", str(tmp_path / "x")])
    assert code == 2
    assert "has no chat template" in capsys.readouterr().err


def test_unreadable_chain_of_thought_answers_are_wrong_counted_and_kept(lm_env, tmp_path):
    out = tmp_path / "cot"
    code = main([
        "evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--benchmarks", "condaqa", "--strategy", "cot_answer_only",
        "--out", str(out), "--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1",
        "--trainer.precision=32-true", "--evaluation.bootstrap=0",
    ])
    assert code == 0
    (record,) = _records(out)
    lines = [json.loads(x) for x in (out / "predictions" / "condaqa-test-validate.jsonl").read_text().splitlines()]
    assert len(lines) == record["metrics"]["n"] == 4  # none dropped
    unread = [x for x in lines if so_the_answer_is(x["response"]) is None]
    assert record["metrics"]["n_unparsed"] == len(unread) > 0  # a random model never writes "So the answer is"
    assert all(x["prediction"] is None and x["unparsed"] for x in unread)
    assert all(x["prompt"].endswith("Answer: Let's think step by step.") for x in lines)
    scored = score_file("condaqa", "test", out / "predictions" / "condaqa-test-validate.jsonl", allow_missing=True, bootstrap=0)
    assert scored.metrics["n_unparsed"] == len(unread) and scored.metrics["n"] == 4
    assert scored.metrics["accuracy"] == pytest.approx(record["metrics"]["accuracy"])


def test_tinad_zeroshot_protocol_takes_the_plain_or_the_chat_prompt(lm_env, tmp_path):
    common = ["--trainer.torch_threads=1", "--trainer.precision=32-true", "--evaluation.bootstrap=0"]
    plain = tmp_path / "plain"
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--protocol", "tinad-zeroshot", "--out", str(plain), *common]) == 0
    # every split of the dataset (Table 4 is over all its sentences, §4.3)
    assert [r["variant"] for r in _records(plain)] == ["plain/train", "plain/validation", "plain/test"]
    line = json.loads((plain / "predictions" / "tinad-test-plain-test.jsonl").read_text().splitlines()[0])
    assert line["prompt"].startswith("Is the following statement True or False? ") and line["prompt"].endswith(".")
    assert not line["prompt"].endswith("..")
    assert set(line["response"]) == {"True", "False"}  # each label's log-likelihood
    assert line["prediction"] == max(line["response"], key=line["response"].get)
    chat = tmp_path / "chat"
    assert main(["evaluate", "--model", str(lm_env["llama_chat"]), "--family", "causal_lm", "--protocol", "tinad-zeroshot", "--chat", "--out", str(chat), *common]) == 0
    records = _records(chat)
    line = json.loads((chat / "predictions" / "tinad-test-chat-test.jsonl").read_text().splitlines()[0])
    assert [r["variant"] for r in records] == ["chat/train", "chat/validation", "chat/test"]
    assert line["prompt"].startswith("<s>[INST] Is the following statement True or False? Answer only True or False. ")


def test_generation_is_the_same_batched_alone_and_with_the_shared_prefix_run_once(lm_env, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from negtrain.models import generation

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(lm_env["llama"])
    tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(lm_env["llama"]).eval()
    strategy = get_strategy("scone", "hypothesis_q")
    prompts = [strategy.paper_prompt({"premise": f"the man does not own a {w}", "hypothesis": "the man does not own a dog"}, None).text()
               for w in ("cat", "big collie", "very small and quiet terrier", "poodle")]
    limits = generation.Limits(12, ("\n\n",))
    ids = tok(prompts)["input_ids"]
    batch = torch.full((len(ids), max(map(len, ids))), tok.pad_token_id)
    mask = torch.zeros_like(batch)
    for i, x in enumerate(ids):
        batch[i, batch.shape[1] - len(x):], mask[i, batch.shape[1] - len(x):] = torch.tensor(x), 1
    p, _, _ = generation.shared_prefix(batch, mask, tok.pad_token_id)
    assert p >= 300  # the four demonstrations and "Q: Assume that the man does not own a"
    shared = generation.respond(model, tok, prompts, limits, batch_size=4)
    alone = [generation.respond(model, tok, [x], limits, batch_size=1)[0] for x in prompts]
    monkeypatch.setattr(generation, "MIN_SHARED_PREFIX", 10**9)
    plain = generation.respond(model, tok, prompts, limits, batch_size=4)
    assert [g.text for g in shared] == [g.text for g in plain] == [g.text for g in alone]
    assert [g.tokens for g in shared] == [g.tokens for g in plain]
    assert all("\n\n" not in g.text for g in shared)


def test_a_seq2seq_model_answers_a_strategy_with_the_papers_shots(lm_env, tmp_path):
    out = tmp_path / "t5"
    code = main([
        "evaluate", "--model", str(lm_env["t5"]), "--family", "seq2seq", "--benchmarks", "scone", "--strategy", "hypothesis_q",
        "--shots", "paper", "--out", str(out), "--trainer.limit_val_batches=1", "--data.eval_batch_size=4",
        "--trainer.torch_threads=1", "--trainer.precision=32-true", "--evaluation.bootstrap=0",
    ])
    assert code == 0
    (record,) = _records(out)
    lines = [json.loads(x) for x in (out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()]
    assert len(lines) == record["metrics"]["n"] == 6 and record["metrics"]["n_unparsed"] == 0  # one whole contrast set
    for line in lines:
        assert line["prompt"].startswith(E4) and line["shots"] == ["paper:1", "paper:2", "paper:3", "paper:4"]
        assert line["prediction"] == ("entailment" if "yes" in line["response"].lower() else "not_entailment")
