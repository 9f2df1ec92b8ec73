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
from negtrain.recipes import available_recipes, load_recipe

from conftest import FAST

NEGNLI_MNLI = {"train": {("negnli-mnli", "train85")}, "lr": 2e-5, "batch": 16, "epochs": 5, "seeds": None,
               "cites": ["§4.1", "Table 12"], "weight_decay": 0.0}
TINAD_CODE = {"train": {("tinad", "train")}, "lr": 3e-4, "batch": 32, "epochs": 3, "seeds": None,
              "selection": "tinad/validation/accuracy", "adapter": ("qlora", 8, 16, 0.05)}

#: recipe -> what its source says. "cites": strings its `# Follows:` line must hold.
SOURCES = {
    # Truong et al. 2022 (NaN-NLI): "the MNLI subset of the NegNLI dataset" (§4.1); Table 12.
    "nannli_roberta_negnli": NEGNLI_MNLI,
    "nannli_cuenb": NEGNLI_MNLI,
    # NaN-NLI Table 11: batch 16, lr 3e-5, 3 epochs, Adam.
    "mnli_cuenb": {"train": {("mnli", "train")}, "lr": 3e-5, "batch": 16, "epochs": 3, "seeds": None,
                   "cites": ["Table 11"], "weight_decay": 0.0, "warmup": 0.0},
    # Ravichander et al. 2022 (CondaQA) C.1: five seeds, lr 5e-5, 5 epochs, best validation accuracy.
    "condaqa_unifiedqa": {"train": {("condaqa", "train")}, "lr": 5e-5, "batch": 16, "epochs": 5,
                          "seeds": [70, 69, 68, 67, 66], "cites": ["C.1", "Table 11"], "selection": "condaqa/dev/accuracy"},
    # García-Ferrero et al. 2023 (TINAD) Appendix B: LoRA on an 8-bit base; Vicuna-13B or Flan-T5.
    "tinad_vicuna_lora8": {**TINAD_CODE, "cites": ["Appendix B", "Table 6"], "bits": 8, "model": "lmsys/vicuna-13b-v1.1",
                           "prompt_loss_weight": 0.05},
    "tinad_flant5": {**TINAD_CODE, "cites": ["Appendix B", "Table 6"], "bits": 8, "model": "google/flan-t5-xxl"},
    # The authors' later repository: configs/train/Llama2-7b.yaml, 4 bits, selection on accuracy.
    "tinad_repo_llama2_qlora": {**TINAD_CODE, "cites": ["configs/train/Llama2-7b.yaml"], "bits": 4,
                                "model": "meta-llama/Llama-2-7b-chat-hf", "prompt_loss_weight": 0.05},
}


def _header(name: str) -> str:
    text = available_recipes()[name].read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if line.startswith("#"))


def _follows(header: str) -> str:
    """The `# Follows:` paragraph (its line and the indented continuation lines)."""
    lines = header.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("# Follows:"))
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
        assert r.selection.metric == source["selection"]
    if "bits" in source:
        a = r.adapter
        assert (a.type, a.r, a.alpha, a.dropout) == source["adapter"][:1] + (8, 16, 0.05)
        assert a.bits == source["bits"] and r.model.name == source["model"]
    if "prompt_loss_weight" in source:  # the code's: the prompt's share of an example's loss
        assert (r.model.prompt_loss_weight, r.model.prompt_loss) == (source["prompt_loss_weight"], "share")


def test_the_tinad_recipes_name_which_setup_they_are():
    paper = [n for n in SOURCES if n.startswith("tinad") and SOURCES[n]["bits"] == 8]
    assert sorted(paper) == ["tinad_flant5", "tinad_vicuna_lora8"]
    for name in paper:
        assert "the paper's" in _header(name).splitlines()[0]
    first = _header("tinad_repo_llama2_qlora").splitlines()[0]
    assert "later repository setup" in first and "not the paper's" in first


def test_every_recipe_that_claims_a_source_is_checked_here():
    claiming = {n for n in available_recipes() if "# Follows:" in _header(n)}
    assert claiming == set(SOURCES)


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
                     "--data.eval=[{benchmark: scone, split: test}]"]) == 0
    assert json.loads((parent / "seeds.json").read_text())["runs"] == ["seed3", "seed5"]
    assert [yaml.safe_load((parent / f"seed{s}" / "recipe.yaml").read_text())["seed"] for s in (3, 5)] == [3, 5]
    assert (parent / "seed5" / "command.txt").read_text().strip().endswith("--seed=5")
