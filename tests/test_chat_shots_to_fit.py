"""CondaQA's shots-to-fit rule (nine shots, eight where nine do not fit; Ravichander et al. 2022,
Appendix C.2) and the over-length check under ``--chat``: measured on the text the model is given
(the chat template's rendering), before any weights load, on every row, naming the row's id once,
through every path that builds prompts: a card with and without ``--chat`` on the hf and
transformers backends, a protocol (``condaqa-fewshot``) with ``--chat``, and ``validate``'s
per-epoch evaluation of a causal LM whose recipe says ``model.chat: true``. (One place builds and
checks them all: negtrain/engine/prompts.py.)

The fixture is tests/test_shots_to_fit.py's (split 1's ninth shot long, its fourth question on a
long passage); the tiny model has a chat template (``[INST] ... [/INST]``), and its context is
chosen from the chat renderings' real token counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

import negtrain.models.lm as lm
import negtrain.serving.in_process as in_process
from negtrain.benchmarks.condaqa import Condaqa
from negtrain.cli import main
from negtrain.config import model_config
from negtrain.models.prompting import PromptSettings, prompts_with_shots
from test_shots_to_fit import LONG, ROOM, SPLIT, write_fixture
from tiny_models import save_tiny_llama, validate_tiny

ARGS = ["--family", "causal_lm", "--model.max_new_tokens=2", "--trainer.torch_threads=1", "--evaluation.bootstrap=0",
        "--data.eval_batch_size=4"]
ENTRY = {"benchmark": "condaqa", "split": SPLIT, "shots": 9, "min_shots": 8}
NINE = [f"condaqa/fewshot_train_1/{510 + i}" for i in range(9)]


@pytest.fixture
def world(tmp_path, monkeypatch, one_thread):
    data = tmp_path / "data"
    write_fixture(data, 1)
    for k in range(2, 6):  # the protocol's other splits, whose rows all fit
        write_fixture(data, k, long_row=False)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    tok = AutoTokenizer.from_pretrained(save_tiny_llama(tmp_path / "tok", None, chat=True))
    bench = Condaqa()
    examples = bench.load(SPLIT)

    def lengths(shots: int, strategy: str | None = None, chat: bool = True) -> list[int]:
        cfg = model_config(name="m", family="causal_lm", max_new_tokens=ROOM)
        prompts, _ = prompts_with_shots(bench, SPLIT, examples, PromptSettings(shots=shots, strategy=strategy), cfg, 0)
        if not chat:
            return [len(x) for x in tok([p.text() for p in prompts])["input_ids"]]
        texts = [tok.apply_chat_template([{"role": "user", "content": p.text()}], add_generation_prompt=True, tokenize=False)
                 for p in prompts]
        return [len(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]

    nine, eight = lengths(9), lengths(8)
    # the fixture does what it says under the template too: the long row needs more than the short
    # rows' nine shots, its eight-shot chat fits where their nine do, and the template adds tokens
    assert max(nine[:3]) < nine[3] and eight[3] <= max(nine[:3])
    assert all(c > p for c, p in zip(nine, lengths(9, chat=False), strict=True))
    answer_room = PromptSettings(strategy="answer").generating_answer(bench).max_new_tokens
    return {"tmp": tmp_path, "nine": nine, "eight": eight, "ids": [e.id for e in examples], "lengths": lengths,
            "answer_room": answer_room}


def _model(world, context: int) -> Path:
    return save_tiny_llama(world["tmp"] / f"m{context}", None, chat=True, context=context)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _no_weights(monkeypatch) -> None:
    """Loading the weights, or generating, before every prompt is checked fails the test."""
    monkeypatch.setattr(lm, "load_base", lambda *a, **k: pytest.fail("the weights were loaded before every prompt was checked"))
    monkeypatch.setattr(in_process, "load_model", lambda *a, **k: pytest.fail("the weights were loaded before every prompt was checked"))
    monkeypatch.setattr(in_process, "respond_ids", lambda *a, **k: pytest.fail("a generation ran before every prompt was checked"))


@pytest.mark.parametrize("backend", [[], ["--backend", "transformers"]], ids=["hf", "transformers"])
def test_chat_card_gives_eight_shots_to_the_row_whose_chat_does_not_fit_nine(world, backend):
    # Just short of the long row's nine-shot chat: measured on the plain text it would fit (the
    # template adds tokens), measured as the model is given it, it gets eight.
    context = world["nine"][3] + ROOM - 1
    out = world["tmp"] / f"card-{len(backend)}"
    assert main(["evaluate", "--model", str(_model(world, context)), "--out", str(out), "--chat", *ARGS, *backend,
                 f"--data.eval=[{json.dumps(ENTRY)}]"]) == 0
    lines = {x["id"]: x for x in _lines(out / "predictions" / f"condaqa-{SPLIT}-validate.jsonl")}
    for row_id in world["ids"][:3]:
        assert lines[row_id]["n_shots"] == 9 and lines[row_id]["shots"] == NINE
    long_row = lines[world["ids"][3]]
    assert long_row["n_shots"] == 8 and long_row["shots"] == NINE[:8]
    assert long_row["prompt"].startswith("<s>[INST]") and LONG not in long_row["prompt"]  # the template's text, eight shots
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert record["shots_used"] == {"asked": 9, "fewest": 8, "rows": {"9": 3, "8": 1}}
    assert "min_shots not applied" not in (record.get("note") or "")  # the rule was applied, and the record does not say otherwise


@pytest.mark.parametrize("chat", [[], ["--chat"]], ids=["plain", "chat"])
@pytest.mark.parametrize("backend", [[], ["--backend", "transformers"]], ids=["hf", "transformers"])
def test_a_card_row_that_fits_neither_way_fails_before_the_weights_naming_its_id_once(world, backend, chat, monkeypatch, capsys):
    lengths = world["eight"] if chat else world["lengths"](8, chat=False)
    model = _model(world, lengths[3] + ROOM - 1)  # the long row fits not even with eight shots
    _no_weights(monkeypatch)
    capsys.readouterr()
    entries = [{**ENTRY, "split": "fewshot_test_2"}, ENTRY]  # the failing row is in the second entry
    code = main(["evaluate", "--model", str(model), "--out", str(world["tmp"] / "card"), *chat, *ARGS, *backend,
                 f"--data.eval={json.dumps(entries)}"])
    assert code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    row = world["ids"][3]
    assert f"condaqa/{SPLIT}: " in err[0] and f"row {row} is {lengths[3]} tokens" in err[0] and err[0].count(row) == 1
    assert "even with 8 shot(s), the fewest this entry allows (min_shots)" in err[0]
    assert not (world["tmp"] / "card" / "parts" / "condaqa-fewshot_test_2.json").exists()


@pytest.mark.parametrize("chat", [[], ["--chat"]], ids=["plain", "chat"])
def test_a_protocol_row_that_fits_neither_way_fails_before_the_weights_naming_its_id_once(world, chat, monkeypatch, capsys):
    lengths = world["lengths"](8, "answer", chat=bool(chat))
    room = world["answer_room"]
    model = _model(world, lengths[3] + room - 1)
    _no_weights(monkeypatch)
    capsys.readouterr()
    code = main(["evaluate", "--model", str(model), "--out", str(world["tmp"] / "card"), "--protocol", "condaqa-fewshot", *chat,
                 "--family", "causal_lm", "--trainer.torch_threads=1", "--evaluation.bootstrap=0"])
    assert code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    row = world["ids"][3]
    # the variant names the entry; the row's id (which holds its benchmark and split) is named once
    assert f"condaqa/{SPLIT}/fewshot/1: " in err[0] and f"row {row} is {lengths[3]} tokens" in err[0] and err[0].count(row) == 1
    assert "even with 8 shot(s)" in err[0]


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
def test_the_protocol_under_chat_fits_its_shots_before_the_weights_load(world, chat, monkeypatch):
    """The protocol's entries, planned as the card plans them, prepared by the engine on the
    transformers backend (no weights loaded): the long row of each in-context variant of split 1
    gets eight shots, measured on the text the model is given."""
    from negtrain.engine.prompts import prepare_all
    from negtrain.evaluation.card_plan import CardRequest, plan_card
    from negtrain.serving.backend import BackendContext, open_backend

    lengths = world["lengths"](9, "answer", chat=chat)
    model = _model(world, lengths[3] + world["answer_room"] - 1)  # nine do not fit the long row; eight do
    _no_weights(monkeypatch)
    card = plan_card(CardRequest(model=str(model), family="causal_lm", protocol="condaqa-fewshot", chat=chat, out=world["tmp"] / "c"))
    recipe = card.plan.recipe
    backend = open_backend("transformers", BackendContext(recipe.model.name, None, None, recipe))
    fewshot = [e for e in card.plan.evals if e.variant == "fewshot/1"]
    prepared = prepare_all(recipe, fewshot, backend)[f"condaqa/{SPLIT}/fewshot/1"]
    assert prepared.shot_ids is not None and [len(s) for s in prepared.shot_ids] == [9, 9, 9, 8]
    assert prepared.note is None  # not "min_shots not applied"


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
def test_validate_of_a_chat_recipe_fits_shots_as_the_card_does(world, chat, monkeypatch):
    """``validate`` (the per-epoch evaluation ``fit`` runs too: the same eval sets, built by the
    family's builder through the engine) of a recipe with ``model.chat``: the long row gets eight."""
    lengths = world["nine"] if chat else world["lengths"](9, chat=False)
    model = _model(world, lengths[3] + ROOM - 1)
    out = validate_tiny(model, "causal_lm", [ENTRY], world["tmp"] / "run", eval_batch_size=4,
                        model_settings={"max_new_tokens": ROOM, "chat": chat})
    (path,) = (out / "predictions").glob(f"condaqa-{SPLIT}-*.jsonl")
    lines = {x["id"]: x for x in _lines(path)}
    assert [lines[i]["n_shots"] for i in world["ids"]] == [9, 9, 9, 8]
    assert ("[INST]" in lines[world["ids"][3]]["prompt"]) == chat


def test_validate_of_a_chat_recipe_fails_before_the_weights_when_a_row_fits_neither_way(world, monkeypatch):
    from negtrain.core.errors import ConfigError

    model = _model(world, world["eight"][3] + ROOM - 1)
    _no_weights(monkeypatch)
    with pytest.raises(ConfigError, match=rf"condaqa/{SPLIT}: .* even with 8 shot\(s\).* row {world['ids'][3]} is {world['eight'][3]} tokens"):
        validate_tiny(model, "causal_lm", [ENTRY], world["tmp"] / "run", eval_batch_size=4, model_settings={"max_new_tokens": ROOM, "chat": True})


def test_fit_of_a_chat_recipe_fits_shots_in_its_per_epoch_evaluation(world):
    """``fit``'s per-epoch evaluation of a causal LM under ``model.chat`` (one step on split 1's
    nine shots): the long row is given eight, measured on the chat the model is given."""
    from negtrain.config import validate_recipe
    from negtrain.recipes import LoadedRecipe
    from negtrain.training.run import fit

    model = _model(world, world["nine"][3] + ROOM - 1)
    raw = {
        "description": "tiny causal LM, fit under --chat",
        "model": {"name": str(model), "family": "causal_lm", "max_length": 256, "max_new_tokens": ROOM, "chat": True},
        "data": {"train": [{"benchmark": "condaqa", "split": "fewshot_train_1"}], "eval": [ENTRY], "batch_size": 4,
                 "eval_batch_size": 4},
        "trainer": {"enable_progress_bar": False, "accelerator": "cpu", "max_epochs": 1, "torch_threads": 1},
        "evaluation": {"bootstrap": 0},
        "logger": "none",
        "selection": {"epoch": "last"},  # its only eval set is a test split: nothing is picked on it
    }
    out = world["tmp"] / "fit"
    fit(LoadedRecipe("tiny", world["tmp"] / "fit.yaml", validate_recipe(raw, "test")), out)
    (path,) = (out / "predictions").glob(f"condaqa-{SPLIT}-*.jsonl")
    lines = {x["id"]: x for x in _lines(path)}
    assert [lines[i]["n_shots"] for i in world["ids"]] == [9, 9, 9, 8]
    assert lines[world["ids"][3]]["prompt"].startswith("<s>[INST]")
