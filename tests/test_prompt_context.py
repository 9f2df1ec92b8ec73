"""No evaluation prompt is cut without the run saying so: a language model is evaluated at its
own context length, a prompt (with its answer room) that does not fit is an error naming the
row and the lengths, and ``--truncate left`` cuts, counts the rows cut and logs what the model saw.
CondaQA's nine-shot split on tiny Llama-style models of 512 and 8,192 positions (the tiny
tokenizer spends about twice a real one's tokens: 8,192 here is a real model's 4,096)."""

from __future__ import annotations

import json
import re

import pytest
from transformers import AutoTokenizer

import negtrain.serving.in_process as in_process
import negtrain.serving.in_process_load as in_process_load
from negtrain.benchmarks.condaqa import Condaqa
from negtrain.cli import main
from negtrain.models.context import Context, model_context, rows_over
from negtrain.core.errors import ConfigError
from tiny_models import save_tiny_llama

SPLIT = "fewshot_test_1"
ARGS = ["--family", "causal_lm", f"--data.eval=[{{benchmark: condaqa, split: {SPLIT}, shots: 9}}]",
        "--trainer.limit_val_batches=1", "--data.eval_batch_size=2", "--model.max_new_tokens=2",
        "--trainer.torch_threads=1", "--evaluation.bootstrap=0"]


def _lines(out):
    return [json.loads(x) for x in (out / "predictions" / f"condaqa-{SPLIT}-validate.jsonl").read_text().splitlines()]


def _card(model, out, *extra):
    return main(["evaluate", "--model", str(model), "--out", str(out), *ARGS, *extra])


def test_nine_shots_over_a_512_token_context_exit_2_naming_the_row_and_lengths(lm_env, tmp_path, capsys, monkeypatch):
    model = save_tiny_llama(tmp_path / "m512", lm_env["data"], context=512)
    monkeypatch.setattr(in_process_load, "load_base", lambda *a, **k: pytest.fail("the weights were loaded before the prompts were checked"))
    capsys.readouterr()  # what saving the model printed
    assert _card(model, tmp_path / "card") == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    found = re.search(rf"condaqa/{SPLIT}: (\d+) of 1441 prompts do not fit the model's context of 512 tokens "
                      r"\(the model config's max_position_embeddings\); the first, row (\S+), is (\d+) tokens and its answer needs 2 more", err[0])
    assert found, err[0]
    assert found.group(2).startswith(f"condaqa/{SPLIT}/") and int(found.group(3)) + 2 > 512
    assert "fewer shots" in err[0] and "a model with a longer context" in err[0] and "--truncate left" in err[0]


def test_a_long_context_sees_all_nine_passages_and_truncate_left_counts_what_it_cut(lm_env, tmp_path, monkeypatch):
    greedy, seen = in_process.respond_ids, []

    def recording(model_, tokenizer, ids, *rest):
        seen.extend(tuple(row) for row in ids)
        return greedy(model_, tokenizer, ids, *rest)

    monkeypatch.setattr(in_process, "respond_ids", recording)
    assert _card(lm_env["llama"], tmp_path / "whole") == 0
    tok = AutoTokenizer.from_pretrained(lm_env["llama"])
    passages = [e.inputs[0] for e in Condaqa().load("fewshot_train_1")]
    whole = {x["id"]: x["prompt"] for x in _lines(tmp_path / "whole")}
    assert len(whole) == 2
    for prompt in whole.values():
        assert all(p in prompt for p in passages)
    # The logged prompt is what was tokenized, whole (more than 512 tokens).
    tokenized = {tuple(tok(p)["input_ids"]) for p in whole.values()}
    assert tokenized == set(seen) and all(len(ids) > 512 for ids in tokenized)
    record = json.loads((tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()[0])
    assert "n_truncated" not in record["metrics"]

    seen.clear()
    model = save_tiny_llama(tmp_path / "m512", lm_env["data"], context=512)
    assert _card(model, tmp_path / "cut", "--truncate", "left") == 0
    record = json.loads((tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()[0])
    assert record["metrics"]["n_truncated"] == 2 and "--truncate left" in record["note"]
    assert f"condaqa/{SPLIT}: n_truncated 2 of 2" in (tmp_path / "cut" / "card.md").read_text()
    # The model saw BOS and the prompt's last 509 tokens (2 left for the answer); the logged prompt
    # is those tokens decoded, which still end with the row's own passage and question.
    assert all(len(ids) == 512 - 2 and ids[0] == tok.bos_token_id for ids in seen)
    cut = _lines(tmp_path / "cut")
    assert {x["prompt"] for x in cut} == {tok.decode(ids[1:]) for ids in seen}
    rows = {e.id: e for e in Condaqa().load(SPLIT)}
    for line in cut:
        passage, question = rows[line["id"]].inputs[:2]
        assert passage in line["prompt"] and question in line["prompt"]
        assert not all(p in line["prompt"] for p in passages)


def test_the_context_is_the_models_own_and_a_real_tokenizer_limit_is_kept_where_smaller():
    class Config:
        max_position_embeddings = 4096

    class Tok:
        model_max_length = int(1e30)  # transformers' "no limit"

    assert model_context(Config(), Tok()) == Context(4096, "the model config's max_position_embeddings")
    Tok.model_max_length = 2048
    assert model_context(Config(), Tok()).limit == 2048
    assert model_context(object(), Tok()) == Context(2048, "the tokenizer's model_max_length")
    Tok.model_max_length = int(1e30)
    assert model_context(object(), Tok()).limit > 10**12  # T5's relative positions: never cut
    # Answer room counts: a prompt that fits alone but not with its answer is over.
    assert rows_over([10, 8], 3, Context(12, "x", "left"), "b/s", ["a", "b"]) == [0]
    with pytest.raises(ConfigError, match="row a, is 10 tokens and its answer needs 3 more"):
        rows_over([10, 8], 3, Context(12, "x"), "b/s", ["a", "b"])


def test_truncate_left_is_refused_for_a_served_model(capsys):
    """Nothing cuts a served prompt, so --truncate left there is an error, not ignored."""
    code = main(["evaluate", "--model", "m", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                 "--benchmarks", "scone", "--truncate", "left"])
    assert code == 2
    err = capsys.readouterr().err
    assert "error: --truncate left: a served model is sent every prompt whole" in err and "Traceback" not in err


def test_a_cut_keeps_the_prompts_end_and_a_causal_prompts_bos():
    from negtrain.data.encoded import EncodedSplit
    from negtrain.models.context import fit_split

    def rows(split):
        return [split.input_ids[a:b].tolist() for a, b in zip(split.offsets[:-1].tolist(), split.offsets[1:].tolist(), strict=False)]

    # A seq2seq encoder (no BOS, no answer room): the end is kept, with T5's closing EOS (1).
    split, cut = fit_split(EncodedSplit.from_lists([[5, 6, 7, 8, 1], [3, 1]], None), 0, Context(3, "x", "left"), "b/s", ["a", "b"], None)
    assert rows(split) == [[7, 8, 1], [3, 1]] and cut == [0]
    # A causal prompt keeps its BOS (1) and its end, with 1 token left for the answer.
    split, cut = fit_split(EncodedSplit.from_lists([[1, 5, 6, 7, 8]], None), 1, Context(4, "x", "left"), "b/s", ["a"], 1)
    assert rows(split) == [[1, 7, 8]] and cut == [0]
    whole = EncodedSplit.from_lists([[1, 5]], None)
    assert fit_split(whole, 1, Context(4, "x"), "b/s", ["a"], 1) == (whole, [])  # fits: as it is
    with pytest.raises(ConfigError, match="leaves no room for a prompt"):
        fit_split(EncodedSplit.from_lists([[1, 5, 6]], None), 3, Context(4, "x", "left"), "b/s", ["a"], 1)


def test_protocol_md_lists_the_rows_cut_per_variant(data_dir):
    from negtrain.prompts.protocols import get_protocol
    from negtrain.evaluation.protocol import protocol_markdown

    protocol = get_protocol("scone-icl")
    records = [{"benchmark": "scone", "split": "test", "variant": v.name, "metrics": {"accuracy": 0.5, "n": 4.0, "n_truncated": float(i)}}
               for i, v in enumerate(protocol.variants[:2])]
    text = protocol_markdown(protocol, records, "m", 0, 0)
    first, second = protocol.variants[0].name, protocol.variants[1].name
    assert f"- {first}: n_truncated 0 " in text and f"- {second}: n_truncated 1 " in text
