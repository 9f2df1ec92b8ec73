"""Each recipe that says it follows a paper holds that paper's values: its header cites the table or
section (`# Follows:`) and lists its deliberate departures (`# Departures:`), and the values below,
read from the papers (and, where a recipe says so, the authors' code), are checked against the
recipe's own: data sources, learning rate, batch, epochs, seeds and what makes the setup the one
named (the quantization of a TINAD base, the checkpoint selection)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from negtrain import cli
from negtrain.config import on_test_split
from negtrain.recipes import available_recipes, load_recipe

from conftest import FAST

MIX_SOURCES = {("mnli", "train"), ("negnli-rte", "train"), ("negnli-snli", "train"), ("negnli-mnli", "train"),
               ("monli", "train"), ("scone", "train")}

NEGNLI_MNLI = {"train": {("negnli-mnli", "train85")}, "lr": 2e-5, "batch": 16, "epochs": 5, "seeds": None,
               "cites": ["§4.1", "Table 12"], "weight_decay": 0.0, "selection": "negnli-mnli/val15/accuracy",
               "says": ["batch 16, lr 2e-5, 5 epochs"], "max_length": 128,
               # the paper gives the 85:15 ratio; the split itself (train85/val15) is negtrain's hash split
               "departs": ["the 85/15 split of NegNLI-MNLI is negtrain's own"]}
TINAD_CODE = {"train": {("tinad", "train")}, "lr": 3e-4, "batch": 32, "epochs": 3, "seeds": None,
              "selection": "tinad/validation/accuracy", "adapter": ("qlora", 8, 16, 0.05), "weight_decay": 0.0, "warmup": 0.03,
              "says": ["r 8, alpha 16, dropout 0.05", "lr 3e-4", "3% warmup", "weight decay 0, 3 epochs, batch 32"]}
#: TINAD §6 (Table 7, Figure 2): the paper's Vicuna-13B setup (tinad_vicuna_lora8) on part of the train split.
TINAD_TABLE7 = {**TINAD_CODE, "cites": ["§6", "Table 7", "Appendix B"], "bits": 8, "model": "lmsys/vicuna-13b-v1.1",
                "prompt_loss_weight": 0.05, "chat_template": False}
#: ScoNe trains on "MoNLI": the recipes read it as NMoNLI's train split, and say PMoNLI is not used.
MONLI_HALF = "PMoNLI (pmonli.jsonl, the affirmative half) is not trained on"
#: ScoNe Appendix A.1: lr 1e-5, batch 4, 6 accumulation steps, a fixed 10 epochs (no epoch chosen).
SCONE_A1 = {"train": {("monli", "train"), ("scone", "train")}, "lr": 1e-5, "batch": 24, "epochs": 10, "seeds": None,
            "batch_size": 4, "selection_epoch": "last", "weight_decay": 0.01, "warmup": 0.0, "max_length": 256,
            "says": ["lr 1e-5, batch 4 with 6 gradient accumulation steps", "10 epochs", "weight decay 0.01"],
            "reads": [MONLI_HALF]}

#: recipe -> what its source says. "cites": strings its `# Follows:` line must hold; "says": strings
#: its header must hold, each a value checked against the YAML here.
SOURCES = {
    # Truong et al. 2022 (NaN-NLI): "the MNLI subset of the NegNLI dataset" (§4.1); Table 12.
    "nannli_roberta_negnli": {**NEGNLI_MNLI, "model": "sileod/roberta-base-mnli"},
    "nannli_cuenb": {**NEGNLI_MNLI, "departs": [*NEGNLI_MNLI["departs"], "cuemask_roberta", "corpus", "mnli_cuenb"]},
    # NaN-NLI Table 11: batch 16, lr 3e-5, 3 epochs, Adam.
    "mnli_cuenb": {"train": {("mnli", "train")}, "lr": 3e-5, "batch": 16, "epochs": 3, "seeds": None,
                   "cites": ["Table 11"], "weight_decay": 0.0, "warmup": 0.0, "selection": "mnli/validation_matched/accuracy",
                   "says": ["batch 16,", "lr 3e-5, 3 epochs"], "max_length": 128,
                   # stage 2 of the CueNB chain: its encoder is cuemask_roberta's, whose corpus departs
                   "departs": ["cuemask_roberta", "corpus"]},
    # Ravichander et al. 2022 (CondaQA) C.1: five seeds, lr 5e-5, 5 epochs, best validation accuracy.
    "condaqa_unifiedqa": {"train": {("condaqa", "train")}, "lr": 5e-5, "batch": 16, "epochs": 5,
                          "seeds": [70, 69, 68, 67, 66], "cites": ["C.1", "Table 11"], "selection": "condaqa/dev/accuracy",
                          "weight_decay": 0.0, "max_length": 512,
                          "says": ["lr 5e-5", "for 5 epochs", "70, 69, 68, 67, 66", "max_length 512", "batch size: 16"]},
    "condaqa_unifiedqa_3b_lora": {"train": {("condaqa", "train")}, "lr": 1e-4, "batch": 16, "epochs": 5, "seeds": None, "seed": 42,
                                  "cites": ["C.1"], "selection": "condaqa/dev/accuracy", "weight_decay": 0.0,
                                  "lora": ("lora", 16, 32, 0.05), "model": "allenai/unifiedqa-v2-t5-3b-1363200",
                                  "says": ["r 16, alpha 32, dropout 0.05", "1e-4", "5 epochs", "one seed (42)", "batch size: 16"]},
    # García-Ferrero et al. 2023 (TINAD) Appendix B: LoRA on an 8-bit base; Vicuna-13B or Flan-T5.
    "tinad_vicuna_lora8": {**TINAD_CODE, "cites": ["Appendix B", "Table 6"], "bits": 8, "model": "lmsys/vicuna-13b-v1.1",
                           "prompt_loss_weight": 0.05, "chat_template": False},
    "tinad_flant5": {**TINAD_CODE, "cites": ["Appendix B", "Table 6"], "bits": 8, "model": "google/flan-t5-xxl"},
    # TINAD §6: Table 7's rows and Figure 2 train tinad_vicuna_lora8's setup on part of the train split.
    "tinad_table7_affirmative": {**TINAD_TABLE7, "select": [{"polarity": "affirmation"}],
                                 "says": [*TINAD_TABLE7["says"], "select: [{polarity: affirmation}]"]},
    "tinad_table7_negated": {**TINAD_TABLE7, "select": [{"polarity": "negation"}],
                             "says": [*TINAD_TABLE7["says"], "select: [{polarity: negation}]"]},
    "tinad_figure2_pattern01": {**TINAD_TABLE7, "cites": ["§6", "Figure 2", "Appendix B"], "select": [{"pattern": 1}],
                                "says": [*TINAD_TABLE7["says"], "select: [{pattern: 1}]", "accuracy/pattern/01 .. accuracy/pattern/11"]},
    # The authors' later repository: configs/train/Llama2-7b.yaml, 4 bits, selection on accuracy.
    "tinad_repo_llama2_qlora": {**TINAD_CODE, "cites": ["configs/train/Llama2-7b.yaml"], "bits": 4,
                                "model": "meta-llama/Llama-2-7b-chat-hf", "prompt_loss_weight": 0.05, "chat_template": True},
    # She et al. 2023 (ScoNe): Table 2 (DeBERTa) and Appendix B, Table 6 (RoBERTa), Appendix A.1.
    "scone_deberta": {**SCONE_A1, "cites": ["A.1", "Table 2"], "model": "MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli"},
    "scone_roberta": {**SCONE_A1, "cites": ["A.1", "Table 6"], "model": "roberta-large-mnli"},
    "scone_minilm": {"train": {("monli", "train"), ("scone", "train90")}, "lr": 5e-5, "batch": 16, "epochs": 5, "seeds": None,
                     "cites": ["Table 2"], "selection": "scone/dev10/accuracy", "weight_decay": 0.01, "warmup": 0.06,
                     "says": ["lr 5e-5, batch 16, 5 epochs, 6% warmup", "train90", "dev10"], "max_length": 128,
                     "reads": [MONLI_HALF]},
    # Hossain et al. 2020 (NegNLI) Table 8 (MNLI) and Table 9 (RoBERTa on MNLI: 32, 2e-5, 3 epochs, wd 0).
    "negnli_roberta": {"train": {("mnli", "train"), ("negnli-mnli", "train")}, "lr": 2e-5, "batch": 32, "epochs": 3, "seeds": None,
                       "cites": ["Table 8", "Table 9"], "selection": "mnli/validation_matched/accuracy", "weight_decay": 0.0,
                       "model": "roberta-base", "says": ["batch 32, lr 2e-5, 3 epochs, weight decay 0", "max length 128"],
                       "max_length": 128},
    # Truong et al. 2022 (CueNB): cue masking at 1.0, other tokens at 15%.
    "cuemask_roberta": {"train": {("mnli", "train"), ("scone", "train"), ("monli", "train"), ("negnli-mnli", "train85")},
                        "lr": 5e-5, "batch": 32, "epochs": 3, "seeds": None, "cites": ["CueNB"], "selection": None,
                        "weight_decay": 0.01, "warmup": 0.06, "cue": (1.0, 0.15, 1000), "model": "roberta-base",
                        "says": ["cue_mask_prob 1.0", "15%", "1,000 held-out", "lr 5e-5, batch 32, 3 epochs, weight decay 0.01, 6% warmup"]},
    "cuemask_minilm": {"train": {("scone", "train"), ("monli", "train")}, "lr": 1e-4, "batch": 32, "epochs": 2, "seeds": None,
                       "cites": ["CueNB"], "selection": None, "weight_decay": 0.01, "warmup": 0.06, "cue": (1.0, 0.15, 200),
                       "says": ["lr 1e-4, 2 epochs, 6% warmup", "15%", "200 held-out"]},
    # Hosseini et al. 2021 (BERTNOT): lr 1e-5, batch 32, AdamW wd 0.01, clipping 1.0, γ 0.5.
    "unlikelihood_bert": {"train": {("negated_lama", "train")}, "lr": 1e-5, "batch": 32, "epochs": 5, "seeds": None,
                          "cites": ["BERTNOT"], "selection_epoch": "last", "weight_decay": 0.01, "clip": 1.0, "gamma": 0.5,
                          "model": "bert-base-cased",
                          "says": ["lr 1e-5, batch 32", "weight decay 0.01", "clipping at 1.0", "γ = 0.5", "the last of the 5"]},
    "unlikelihood_minilm": {"train": {("negated_lama", "train")}, "lr": 1e-4, "batch": 32, "epochs": 1, "seeds": None,
                            "cites": ["BERTNOT"], "selection_epoch": "last", "weight_decay": 0.01, "clip": 1.0, "gamma": 0.5,
                            "says": ["γ = 0.5, batch 32", "weight decay 0.01", "clipping at 1.0", "1 epoch, lr 1e-4"]},
    # The project's own mixes: their values are claimed as the project's.
    "mnli_negation_mix": {"train": MIX_SOURCES, "lr": 2e-5, "batch": 32, "epochs": 3, "seeds": None, "cites": ["no paper", "Table 9"],
                          "selection": "mnli/validation_matched/accuracy", "temperature": 2.0, "mix_epoch": 200000,
                          "says": ["T = 2", "2e-5", "3 epochs", "200,000"]},
    "mnli_negation_mix_minilm": {"train": MIX_SOURCES, "lr": 1e-4, "batch": 32, "epochs": 2, "seeds": None, "cites": ["no paper"],
                                 "selection": "mnli/validation_matched/accuracy", "temperature": 2.0, "mix_epoch": 3000,
                                 "says": ["T = 2", "lr 1e-4, 2 epochs of 3,000", "48-pair"]},
}


def _header(name: str) -> str:
    text = available_recipes()[name].read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if line.startswith("#"))


def _follows(header: str) -> str:
    """The `# Follows:` paragraph (its line and the indented continuation lines)."""
    return _part(header, "# Follows:")


def _part(header: str, head: str) -> str:
    """The paragraph of the header that starts with ``head`` (`# Follows:`, `# Departures:`,
    `# Readings`), its line and the indented lines under it, joined as read."""
    lines = header.splitlines()
    start = next((i for i, x in enumerate(lines) if x.startswith(head)), None)
    if start is None:
        return ""
    out = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("#   "):
            break
        out.append(line)
    return " ".join(x.lstrip("# ").strip() for x in out)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_recipe_holds_the_values_its_header_claims(name):
    source = SOURCES[name]
    r = load_recipe(name).recipe
    header = _header(name)
    assert "# Follows:" in header and "# Departures:" in header, f"{name}: the header must cite its source and list its departures"
    follows = _follows(header)
    for cited in source["cites"]:
        assert cited in follows, f"{name}: `# Follows:` does not cite {cited}"
    assert {(s.benchmark, s.split) for s in r.data.train} == source["train"]
    assert r.model.learning_rate == source["lr"]
    assert r.data.batch_size * r.trainer.accumulate_grad_batches == source["batch"]
    assert r.trainer.max_epochs == source["epochs"]
    assert r.seeds == source["seeds"]
    if "weight_decay" in source:
        assert r.model.weight_decay == source["weight_decay"]
    if "warmup" in source:
        assert r.model.warmup_ratio == source["warmup"]
    if "selection" in source:
        assert r.selection.metric == source["selection"] and r.selection.epoch == "best"
    if "selection_epoch" in source:
        assert r.selection.epoch == source["selection_epoch"] and r.selection.metric is None
    if "batch_size" in source:
        assert r.data.batch_size == source["batch_size"]
    if "seed" in source:
        assert r.seed == source["seed"]
    if "model" in source:
        assert r.model.name == source["model"]
    if "select" in source:  # the one training source keeps only these rows (data.train[].select)
        assert [s.select for s in r.data.train] == [source["select"]]
    else:
        assert all(s.select is None for s in r.data.train), f"{name}: trains on part of a split its header does not claim"
    if "bits" in source:
        a = r.adapter
        assert (a.type, a.r, a.alpha, a.dropout) == source["adapter"][:1] + (8, 16, 0.05)
        assert a.bits == source["bits"]
    if "lora" in source:
        a = r.adapter
        assert (a.type, a.r, a.alpha, a.dropout) == source["lora"]
    if "prompt_loss_weight" in source:  # the code's: the prompt's share of an example's loss
        assert (r.model.prompt_loss_weight, r.model.prompt_loss) == (source["prompt_loss_weight"], "share")
    if "chat_template" in source:
        assert r.model.chat_template is source["chat_template"]
    if "cue" in source:
        c = r.objective.cue_masking
        assert (c.cue_mask_prob, c.mlm_probability, c.corpus.held_out) == source["cue"]
    if "gamma" in source:
        assert r.objective.unlikelihood.gamma == source["gamma"]
    if "clip" in source:
        assert r.trainer.gradient_clip_val == source["clip"]
    if "temperature" in source:
        assert (r.data.mix.sampling, r.data.mix.temperature, r.data.mix.epoch) == ("temperature", source["temperature"], source["mix_epoch"])
    flat = " ".join(" ".join(x.lstrip("#").split()) for x in header.splitlines())  # lines joined, as read
    for said in source["says"]:  # the header states the value checked above, in its words
        assert said in flat, f"{name}: the header does not say {said!r}"
    if "max_length" in source:  # what the model sees: the length pairs are cut to, stated where it comes from
        assert r.model.max_length == source["max_length"]
        assert re.search(rf"max[_ ]length {source['max_length']}\b", flat), f"{name}: the header does not state max_length"
    departures, readings = _part(header, "# Departures:"), _part(header, "# Readings")
    for said in source.get("departs", []):
        assert said in departures, f"{name}: `# Departures:` does not say {said!r}"
    for said in source.get("reads", []):
        assert said in readings, f"{name}: `# Readings` does not say {said!r}"


def test_every_shipped_recipe_says_what_it_follows_and_departs_from():
    """Both header lines in every recipe, and every recipe's claims checked by the test above."""
    for name in available_recipes():
        lines = _header(name).splitlines()
        assert any(x.startswith("# Follows:") for x in lines), f"{name}: no `# Follows:` line"
        assert any(x.startswith("# Departures:") for x in lines), f"{name}: no `# Departures:` line"
    assert set(available_recipes()) == set(SOURCES)


def test_the_recipe_claims_page_lists_every_shipped_recipe_once():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "recipe_claims.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\w+)` \|", page, re.M)
    assert sorted(listed) == sorted(available_recipes())


def test_no_shipped_recipe_selects_or_sweeps_on_a_test_split():
    for name in available_recipes():
        r = load_recipe(name).recipe
        assert not on_test_split(r.selection.metric) and not r.selection.allow_test_split, name
        assert r.sweep is None or not on_test_split(r.sweep.metric or r.selection.metric), name


def test_the_two_headers_that_were_false_are_true():
    # The starting checkpoint is not the paper's own MNLI fine-tune: a departure, not "none".
    departures = _header("nannli_roberta_negnli").split("# Departures:")[1].split("# Readings")[0]
    assert "sileod/roberta-base-mnli" in departures and "none" not in departures
    # Vicuna v1.1's tokenizer has no chat template: the YAML writes the plain prompt, as the header says.
    assert load_recipe("tinad_vicuna_lora8").recipe.model.chat_template is False
    assert "chat_template: false" in _header("tinad_vicuna_lora8")


def test_the_tinad_recipes_name_which_setup_they_are():
    paper = [n for n in SOURCES if n.startswith("tinad") and SOURCES[n]["bits"] == 8]
    assert sorted(paper) == ["tinad_figure2_pattern01", "tinad_flant5", "tinad_table7_affirmative", "tinad_table7_negated",
                             "tinad_vicuna_lora8"]
    for name in paper:
        assert "the paper's" in _header(name).splitlines()[0]
    first = _header("tinad_repo_llama2_qlora").splitlines()[0]
    assert "later repository setup" in first and "not the paper's" in first


def test_the_tinad_section_6_recipes_are_tinad_vicuna_lora8_on_part_of_train():
    """Table 7's and Figure 2's recipes differ from the paper's Vicuna setup only in `select`, and
    their filters are TINAD's (checked as a run would, before any model loads)."""
    from negtrain.benchmarks.matrix import resolve_benchmarks
    from negtrain.config import to_dict

    base = to_dict(load_recipe("tinad_vicuna_lora8").recipe)
    for name in ("tinad_table7_affirmative", "tinad_table7_negated", "tinad_figure2_pattern01"):
        r = load_recipe(name).recipe
        mine = to_dict(r)
        resolve_benchmarks(r, announce=False)  # names, splits and the select's filters all known
        for source in mine["data"]["train"]:
            source["select"] = None
        assert {k: v for k, v in mine.items() if k != "description"} == {k: v for k, v in base.items() if k != "description"}, name
        assert "tinad_vicuna_lora8" in _follows(_header(name)), name


def test_figure2_header_names_the_per_pattern_accuracy_tinad_reports():
    """Figure 2's per-pattern accuracy is reported, so its header no longer lists it as missing,
    and the metric it names is one TINAD declares."""
    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.metrics.declared import find

    header = _header("tinad_figure2_pattern01")
    assert "not per pattern" not in header and "not its per-pattern columns" not in header
    assert "accuracy/pattern/01" in header
    found = find(get_benchmark("tinad").reported_metrics, "accuracy/pattern/01")
    assert found is not None and found.name == "accuracy/pattern/<NN>" and found.higher_is_better


@pytest.mark.parametrize("name, select", [
    ("tinad_figure2_pattern01", [{"pattern": 5}]),
    ("tinad_table7_affirmative", [{"polarity": "affirmation"}, {"negation_type": "synthetic"}]),
])
def test_the_other_rows_are_the_override_the_header_shows(name, select):
    """Figure 2's other patterns and Table 7's other rows: the header's `--data.train=` does what it says."""
    from negtrain.recipes import parse_overrides

    override = re.search(r'(--data\.train=)"(.*)"', _header(name))
    assert override, f"{name}: the header shows how to train another row"
    r = load_recipe(name, parse_overrides([override.group(1) + override.group(2)])).recipe
    assert [(s.benchmark, s.split, s.select) for s in r.data.train] == [("tinad", "train", select)]
    assert r.selection.metric == "tinad/validation/accuracy"


def test_the_nannli_recipes_train_on_negnli_mnli_alone():
    for name in ("nannli_cuenb", "nannli_roberta_negnli"):
        sources = {s.benchmark for s in load_recipe(name).recipe.data.train}
        assert sources == {"negnli-mnli"}, name
        assert not re.search(r"all three sources", _header(name))


def test_a_recipe_with_bad_seeds_is_refused_with_one_line(tmp_path, capsys):
    raw = yaml.safe_load(available_recipes()["scone_minilm"].read_text())
    for bad in ([1, 1], [], [-1]):
        raw["seeds"] = bad
        path = tmp_path / "seeded.yaml"
        path.write_text(yaml.safe_dump(raw))
        capsys.readouterr()
        assert cli.main(["fit", "--recipe", str(path), "--output-dir", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert "distinct seeds" in err and "Traceback" not in err and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_recipe_with_seeds_trains_each_by_default(tmp_path):
    """Two real tiny trainings (about two minutes on a shared 2-core machine)."""
    raw = yaml.safe_load(available_recipes()["scone_minilm"].read_text())
    raw["seeds"] = [3, 5]
    path = tmp_path / "seeded.yaml"
    path.write_text(yaml.safe_dump(raw))
    parent = tmp_path / "runs"
    assert cli.main(["fit", "--recipe", str(path), "--output-dir", str(parent), "--logger=none", *FAST,
                     "--trainer.max_epochs=1", "--evaluation.bootstrap=0",
                     "--data.eval=[{benchmark: scone, split: dev10}]"]) == 0
    assert json.loads((parent / "seeds.json").read_text())["runs"] == ["seed3", "seed5"]
    assert [yaml.safe_load((parent / f"seed{s}" / "recipe.yaml").read_text())["seed"] for s in (3, 5)] == [3, 5]
    assert (parent / "seed5" / "command.txt").read_text().strip().endswith("--seed=5")


def test_every_nli_recipe_that_follows_a_paper_states_its_max_length():
    """The length pairs are cut to changes what the model sees; no paper of these states it, so the
    header says the value taken (checked with the YAML by the test above)."""
    for name in available_recipes():
        r = load_recipe(name).recipe
        if r.model.family == "nli" and "no paper" not in _follows(_header(name)):
            assert "max_length" in SOURCES[name], f"{name}: its max_length is not among the claims checked"


def test_a_chained_recipe_names_the_departures_of_the_runs_it_starts_from():
    """A recipe that starts from another recipe's run (model.init_from) inherits that run's
    departures: its own `# Departures:` names every recipe up the chain that departs."""
    writes = {}  # output dir -> the recipe a header shows writing it
    for name in available_recipes():
        for recipe, out in re.findall(r"fit --recipe (\w+) --output-dir (\S+)", _header(name)):
            writes[out] = recipe
    chained = [n for n in available_recipes() if load_recipe(n).recipe.model.init_from]
    assert sorted(chained) == ["mnli_cuenb", "nannli_cuenb"]
    for name in chained:
        departures, up = _part(_header(name), "# Departures:"), name
        while (init := load_recipe(up).recipe.model.init_from) is not None:
            assert init in writes, f"{name}: no header shows which recipe writes {init}"
            up = writes[init]
            if not _part(_header(up), "# Departures:").startswith("Departures: - none"):
                assert up in departures, f"{name}: starts from {up}'s run but its departures do not name {up}"
