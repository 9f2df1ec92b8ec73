"""Unlikelihood training: the loss terms on hand-built distributions, and the objective in the module."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from negtrain.core.errors import DataError
from negtrain.objectives import losses


def logits_for(probs: list[float]) -> torch.Tensor:
    return torch.log(torch.tensor([probs], dtype=torch.float64))


def test_unlikelihood_value_is_minus_log_one_minus_p():
    for p in (0.01, 0.3, 0.7, 0.999):
        probs = [p, (1 - p) / 2, (1 - p) / 2]
        value = losses.unlikelihood(logits_for(probs), torch.tensor([0]))
        assert value.item() == pytest.approx(-math.log(1 - p), rel=1e-6)
    # finite where the naive formula overflows: p(obj) = 1 - 1e-12
    extreme = torch.tensor([[30.0, 0.0, 0.0]])
    assert torch.isfinite(losses.unlikelihood(extreme, torch.tensor([0]))).all()


def test_unlikelihood_gradient_lowers_p_obj():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]], requires_grad=True)
    target = torch.tensor([0])
    before = torch.softmax(logits, -1)[0, 0].item()
    losses.unlikelihood(logits, target).sum().backward()
    # the target logit is pushed down, every other logit up
    assert logits.grad[0, 0] > 0 and (logits.grad[0, 1:] < 0).all()
    with torch.no_grad():
        after = torch.softmax(logits - 0.5 * logits.grad, -1)[0, 0].item()
    assert after < before


def test_likelihood_is_cross_entropy_and_kl_zero_at_reference():
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    assert losses.likelihood(logits, torch.tensor([2])).item() == pytest.approx(-torch.log_softmax(logits, -1)[0, 2].item())
    assert losses.kl_to_reference(logits, logits.clone()).abs().max().item() < 1e-7
    assert losses.kl_to_reference(logits, torch.tensor([[3.0, 2.0, 1.0]])).item() > 0.1


def test_gamma_extremes_are_single_terms():
    ul, ll = torch.tensor([1.0, 3.0]), torch.tensor([10.0, 20.0])
    assert losses.combine(1.0, ul, ll).item() == pytest.approx(2.0)
    assert losses.combine(0.0, ul, ll).item() == pytest.approx(15.0)
    assert losses.combine(0.25, ul, ll).item() == pytest.approx(0.25 * 2 + 0.75 * 15)
    # no NaN leaks in from an unused term
    assert losses.combine(1.0, ul, torch.tensor([float("nan")] * 2)).item() == pytest.approx(2.0)


# ------------------------------------------------------------------------------------------------
# The objective inside the masked-LM module, on a tiny model with the MiniLM tokenizer.


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory, minilm_path):
    """A tiny BERT masked LM saved with the packaged WordPiece tokenizer: fast, and it has a head."""
    from mlm_helpers import save_tiny_mlm

    return save_tiny_mlm(tmp_path_factory.mktemp("tiny-mlm"), minilm_path)


def module_and_batch(tiny_mlm, gamma: float, likelihood: str):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from negtrain.config import model_config
    from negtrain.models.mlm import MaskedLMModule
    from negtrain.objectives.unlikelihood import UnlikelihoodObjective
    from negtrain.models.mlm_inputs import object_token

    tok = AutoTokenizer.from_pretrained(tiny_mlm)
    model = AutoModelForMaskedLM.from_pretrained(tiny_mlm)
    module = MaskedLMModule(
        model, model_config(name=tiny_mlm, family="mlm"), UnlikelihoodObjective(gamma, likelihood), [],
        mask_id=tok.mask_token_id, reference=copy.deepcopy(model),
    )
    module.log = lambda *a, **k: None  # outside a Trainer
    aff = ["The capital of france is [MASK].", "Bees make [MASK]."]
    neg = ["The capital of france is not [MASK].", "Bees do not make [MASK]."]
    obj = torch.tensor([object_token(tok, a, o, "reject", "test") for a, o in zip(aff, ["paris", "honey"], strict=False)])
    a = tok([s.replace("[MASK]", tok.mask_token) for s in aff], padding=True, return_tensors="pt")
    n = tok([s.replace("[MASK]", tok.mask_token) for s in neg], padding=True, return_tensors="pt")
    batch = {"input_ids": a["input_ids"], "attention_mask": a["attention_mask"], "neg_input_ids": n["input_ids"],
             "neg_attention_mask": n["attention_mask"], "obj": obj}
    return module, batch


@torch.no_grad()
def logits_at_mask_by_hand(module, input_ids, attention_mask) -> torch.Tensor:
    """The model's logits at each row's mask token, found row by row (not through the module)."""
    logits = module.model(input_ids=input_ids, attention_mask=attention_mask).logits
    return torch.stack([logits[r, row.index(module.mask_id)] for r, row in enumerate(input_ids.tolist())])


def test_kl_term_is_zero_at_the_starting_model(tiny_mlm):
    module, batch = module_and_batch(tiny_mlm, gamma=0.0, likelihood="kl")
    module.eval()  # dropout off: the model is exactly its frozen copy
    assert module.training_loss(batch).item() == pytest.approx(0.0, abs=1e-6)


def test_module_loss_matches_the_terms_and_lowers_p_obj(tiny_mlm):
    module, batch = module_and_batch(tiny_mlm, gamma=1.0, likelihood="ce")
    module.eval()
    with torch.no_grad():  # make the objects likely, so the test sees more than a 1/V probability
        module.model.get_output_embeddings().bias[batch["obj"]] += 10.0
    neg_logits = logits_at_mask_by_hand(module, batch["neg_input_ids"], batch["neg_attention_mask"])
    p = torch.softmax(neg_logits.double(), -1).gather(1, batch["obj"][:, None]).squeeze(1)
    loss = module.training_loss(batch)
    assert loss.item() == pytest.approx((-torch.log1p(-p)).mean().item(), rel=1e-3)
    # a few SGD steps on the UL term lower p(obj | negated)
    opt = torch.optim.SGD(module.parameters(), lr=0.5)
    for _ in range(5):
        opt.zero_grad()
        module.training_loss(batch).backward()
        opt.step()
    with torch.no_grad():
        after = torch.softmax(module.mask_logits(batch["neg_input_ids"], batch["neg_attention_mask"]).float(), -1)
    assert (after.gather(1, batch["obj"][:, None]).squeeze(1) < p.float() * 0.9).all()


def test_gamma_zero_ce_is_affirmative_cross_entropy(tiny_mlm):
    module, batch = module_and_batch(tiny_mlm, gamma=0.0, likelihood="ce")
    module.eval()
    aff = logits_at_mask_by_hand(module, batch["input_ids"], batch["attention_mask"])
    expected = torch.nn.functional.cross_entropy(aff.float(), batch["obj"])
    assert module.training_loss(batch).item() == pytest.approx(expected.item(), rel=1e-5)


def test_multi_token_objects_are_rejected_unless_a_policy_is_set(minilm_path):
    from transformers import AutoTokenizer

    from negtrain.models.mlm_inputs import object_token

    tok = AutoTokenizer.from_pretrained(minilm_path)
    sentence = "Spiders spin [MASK]."
    with pytest.raises(DataError, match=r"obj_label 'webs' is 2 tokens .*first_subtoken"):
        object_token(tok, sentence, "webs", "reject", "probes.jsonl:3")
    assert object_token(tok, sentence, "webs", "first_subtoken", "x") == tok.convert_tokens_to_ids("web")
    assert object_token(tok, sentence, "silk", "reject", "x") == tok.convert_tokens_to_ids("silk")


# ------------------------------------------------------------------------------------------------
# The negated_probes benchmark and `negtrain evaluate`.


def test_probes_read_and_score_with_evaluate(tmp_path, monkeypatch):
    from negtrain.evaluation.predictions import score_file

    data = tmp_path / "data" / "negated-probes"
    data.mkdir(parents=True)
    rows = [
        {"masked_sentences": ["A is [MASK]."], "masked_negations": ["A is not [MASK]."], "obj_label": "x"},
        {"masked_sentences": "B is [MASK].", "masked_negations": "B is not [MASK].", "obj_label": "y"},
    ]
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    preds = tmp_path / "p.jsonl"
    lines = [("0/affirmative", "x"), ("0/negated", "x"), ("1/affirmative", "z"), ("1/negated", "q")]
    preds.write_text("".join(json.dumps({"id": f"negated_probes/test/{i}", "prediction": p}) + "\n" for i, p in lines))
    m = score_file("negated_probes", "test", preds).metrics
    assert m["negated_top1_error"] == 0.5 and m["affirmative_top1_accuracy"] == 0.5

    (data / "test.jsonl").write_text(json.dumps({"masked_sentences": ["no mask"], "masked_negations": ["x [MASK]"], "obj_label": "x"}) + "\n")
    with pytest.raises(DataError, match=r"test.jsonl:1: field 'masked_sentences': expected exactly one \[MASK\]"):
        score_file("negated_probes", "test", preds)


def test_negated_top1_error_is_lower_is_better():
    from negtrain.benchmarks.negated_probes import NegatedProbes

    assert not NegatedProbes.is_higher_better("negated_top1_error")
    assert NegatedProbes.is_higher_better("affirmative_top1_accuracy")
    assert NegatedProbes.is_count("n_negated") and not NegatedProbes.is_count("negated_top1_error")


def test_unlikelihood_run_end_to_end_and_evaluate_agrees(tiny_mlm, tmp_path, monkeypatch):
    """A short run on the fixture probes (with a KL retention term on plain text): per-epoch probe
    metrics, and `negtrain evaluate` on the predictions file it wrote gives the same numbers."""
    from conftest import FIXTURES

    from negtrain.config import validate_recipe
    from negtrain.evaluation.predictions import score_file
    from negtrain.recipes import LoadedRecipe
    from negtrain.training.run import fit

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(FIXTURES / "data"))
    text = tmp_path / "retention.txt"
    text.write_text("Paris is the capital of France.\nBees make honey in hives.\nThe sun rises in the east.\n")
    recipe = validate_recipe(
        {
            "description": "tiny UL",
            "model": {"name": tiny_mlm, "family": "mlm", "max_length": 32},
            "objective": {"unlikelihood": {"gamma": 0.5, "likelihood": "kl", "retention": {
                "text_files": [str(text)], "weight": 0.1, "loss": "kl", "batch_size": 2}}},
            "data": {"train": [{"benchmark": "negated_probes", "split": "train"}],
                     "eval": [{"benchmark": "negated_probes", "split": "test"}], "batch_size": 8},
            "trainer": {"max_epochs": 1, "limit_train_batches": 2, "enable_progress_bar": False, "gradient_clip_val": 1.0},
            "selection": {"metric": "negated_probes/test/negated_top1_error", "allow_test_split": True},  # its only eval set
        },
        "test",
    )
    run = fit(LoadedRecipe("tiny_ul", tmp_path / "tiny_ul.yaml", recipe), output_dir=tmp_path / "run")
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (probe,) = [r for r in lines if r["benchmark"] == "negated_probes"]
    assert probe["metrics"]["n_negated"] == 20 and probe["metrics"]["n_affirmative"] == 20
    rescored = score_file("negated_probes", "test", run / "predictions" / "negated_probes-test-epoch0.jsonl").metrics
    for key in ("negated_top1_error", "affirmative_top1_accuracy"):
        assert rescored[key] == pytest.approx(probe["metrics"][key])


@pytest.mark.parametrize(
    "objective,message",
    [
        (None, "the 'mlm' family trains with an objective section"),
        ({"unlikelihood": {}, "cue_masking": {}}, "set exactly one of 'unlikelihood' or 'cue_masking'"),
        ({"unlikelihood": {"gamma": 1.5}}, "objective.unlikelihood.gamma"),
        ({"unlikelihood": {"multi_token": "first"}}, "did you mean 'multi_token_objects'"),
        ({"cue_masking": {"mask_replace_prob": 0.9, "random_replace_prob": 0.2}}, "at most 1"),
    ],
)
def test_objective_config_is_validated(objective, message):
    from negtrain.config import validate_recipe
    from negtrain.core.errors import ConfigError

    raw = {"description": "x", "model": {"name": "m", "family": "mlm"}, "data": {"eval": [{"benchmark": "negated_probes", "split": "test"}]}}
    if objective is not None:
        raw["objective"] = objective
    else:  # evaluation alone needs no objective (a report card); training does
        raw["data"]["train"] = [{"benchmark": "negated_probes", "split": "train"}]
    with pytest.raises(ConfigError, match=message):
        validate_recipe(raw, "test")


def test_probes_must_hold_exactly_one_mask_token_when_encoded():
    from negtrain.benchmarks.base import Example
    from negtrain.data.encoded import EncodedSplit
    from negtrain.core.errors import DataError
    from negtrain.models.mlm_inputs import check_one_mask

    MASK = 9
    examples = [Example(id=f"p/{i}", inputs=("x",), label="y", meta={"file": "probes.jsonl", "line": i + 1}) for i in range(3)]
    ok = EncodedSplit.from_lists([[1, MASK, 2], [1, 5, MASK, 2], [1, MASK, 2]], None)
    check_one_mask(ok, MASK, examples, "masked_sentences", 16)
    cut = EncodedSplit.from_lists([[1, MASK, 2], [1, 5, 2], [1, MASK, 2]], None)
    with pytest.raises(DataError, match=r"probes.jsonl:2: field 'masked_sentences': the mask is cut off at model.max_length=16"):
        check_one_mask(cut, MASK, examples, "masked_sentences", 16)
    two = EncodedSplit.from_lists([[1, MASK, 2], [1, MASK, 2], [MASK, MASK, 2]], None)
    with pytest.raises(DataError, match=r"probes.jsonl:3: field 'probe': it holds 2 mask tokens, not one"):
        check_one_mask(two, MASK, examples, "probe", 16)


def test_mask_logits_through_the_head_alone_equal_the_full_forward(tiny_mlm):
    """The LM head runs on the mask positions only; the logits there are the full model's."""
    from negtrain.models.mlm import lm_head

    module, batch = module_and_batch(tiny_mlm, gamma=0.5, likelihood="kl")
    module.eval()
    assert lm_head(module.model) is not None
    with torch.no_grad():
        fast = module.mask_logits(batch["neg_input_ids"], batch["neg_attention_mask"])
        ref_fast = module.reference_mask_logits(batch["input_ids"], batch["attention_mask"])
    full = logits_at_mask_by_hand(module, batch["neg_input_ids"], batch["neg_attention_mask"])
    assert torch.allclose(fast, full, atol=1e-5)
    assert torch.allclose(ref_fast, logits_at_mask_by_hand(module, batch["input_ids"], batch["attention_mask"]), atol=1e-5)


def test_validate_an_unlikelihood_recipe_scores_without_training_data(tiny_mlm, tmp_path, monkeypatch):
    """`validate` reads no training split: the recipe's data.train must not be required then."""
    from conftest import FIXTURES

    from negtrain.config import validate_recipe
    from negtrain.recipes import LoadedRecipe
    from negtrain.training.run import evaluate

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(FIXTURES / "data"))
    recipe = validate_recipe(
        {
            "description": "tiny UL validate",
            "model": {"name": tiny_mlm, "family": "mlm", "max_length": 32},
            "objective": {"unlikelihood": {"gamma": 0.5, "likelihood": "kl"}},
            "data": {"train": [{"benchmark": "negated_probes", "split": "train"}],
                     "eval": [{"benchmark": "negated_probes", "split": "test"}]},
            "trainer": {"enable_progress_bar": False},
            "logger": "none",
        },
        "test",
    )
    run = evaluate(LoadedRecipe("tiny_ul", tmp_path / "r.yaml", recipe), "validate", None, tmp_path / "run")
    (line,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert line["metrics"]["n_negated"] == 20
