"""CondaQA's shots-to-fit rule (Ravichander et al. 2022, Appendix C.2: nine shots, "sometimes only 8
fit in the context"): an entry with ``shots: 9, min_shots: 8`` gives each row nine shots where
they fit the model's context and the first eight where they do not; the number is written per
prediction and counted in the metrics line, card.md and protocol.md. A row that fits with neither
is an error naming it before any generation, on the in-process (hf) path and the ``transformers``
backend alike.

The fixture: split 1's nine shots, the ninth long; four questions, the fourth on a long passage.
The tiny model's context is chosen from the prompts' real token counts so that the three short
rows fit nine shots and the long one only eight (or, for the error, not even eight)."""

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
from negtrain.core.errors import ConfigError
from negtrain.models.context import Context, fit_shots
from negtrain.models.prompting import PromptSettings, prompts_with_shots
from negtrain.prompts.strategies import Prompt
from tiny_models import save_tiny_llama

ROOT = "AbhilashaRavichander/CondaQA/data/few-shot"
SPLIT = "fewshot_test_1"
LONG = " ".join(["The long river did not flood the northern valley that year."] * 8)
#: max_new_tokens: the answer's room in the context.
ROOM = 2


def _row(sample: int, question: str, edit: int, label: str, text: str) -> dict:
    return {"SampleID": sample, "PassageID": 7, "QuestionID": question, "PassageEditID": edit,
            "sentence1": text, "sentence2": "Is it red?", "label": label}


def write_fixture(root: Path, k: int = 1, long_row: bool = True) -> None:
    train = root / ROOT / f"train_splits/sampling_c_shots_9/conda_fewshot_train_{k}.json"
    test = root / ROOT / f"test_splits/conda_fewshot_test_{k}.json"
    train.parent.mkdir(parents=True, exist_ok=True)
    test.parent.mkdir(parents=True, exist_ok=True)
    shots = [_row(500 + 10 * k + i, f"q{i}", 0, "NO", f"Shot {i} is not red.") for i in range(8)]
    shots.append(_row(500 + 10 * k + 8, "q8", 0, "YES", LONG))
    train.write_text("".join(json.dumps(r) + "\n" for r in shots))
    rows = [_row(1000 * k + e, "q20", e, "NO", f"Passage {e} is not blue.") for e in range(3)]
    if long_row:
        rows.append(_row(1000 * k + 3, "q20", 3, "YES", "Passage 3 is not blue. " + LONG[: len(LONG) // 3]))
    test.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def world(tmp_path, monkeypatch, one_thread):
    data = tmp_path / "data"
    write_fixture(data, 1)
    write_fixture(data, 2, long_row=False)  # split 2's rows all fit
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    model = save_tiny_llama(tmp_path / "tok", None)
    tok = AutoTokenizer.from_pretrained(model)
    cfg = model_config(name=str(model), family="causal_lm", max_new_tokens=ROOM)
    bench = Condaqa()
    examples = bench.load(SPLIT)

    def lengths(shots: int) -> list[int]:
        prompts, _ = prompts_with_shots(bench, SPLIT, examples, PromptSettings(shots=shots), cfg, 0)
        return [len(x) for x in tok([p.text() for p in prompts])["input_ids"]]

    nine, eight = lengths(9), lengths(8)
    # the fixture does what it says: the long row needs more than the short rows' nine shots, and
    # its eight-shot prompt is shorter than their nine-shot prompts
    assert max(nine[:3]) < nine[3] and eight[3] <= max(nine[:3])
    return {"tmp": tmp_path, "nine": nine, "eight": eight, "ids": [e.id for e in examples]}


def _model(world, context: int) -> Path:
    return save_tiny_llama(world["tmp"] / f"m{context}", None, context=context)


ARGS = ["--family", "causal_lm", "--model.max_new_tokens=2", "--trainer.torch_threads=1", "--evaluation.bootstrap=0",
        "--data.eval_batch_size=4"]


def _entries(*splits: str) -> str:
    return "--data.eval=[" + ", ".join(f"{{benchmark: condaqa, split: {s}, shots: 9, min_shots: 8}}" for s in splits) + "]"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize("backend", [[], ["--backend", "transformers"]], ids=["hf", "transformers"])
def test_rows_that_do_not_fit_nine_shots_get_eight_counted_per_row_and_in_the_card(world, backend):
    context = max(world["nine"][:3]) + ROOM  # the short rows fit nine; the long one does not
    out = world["tmp"] / f"card-{len(backend)}"
    assert main(["evaluate", "--model", str(_model(world, context)), "--out", str(out), *ARGS, *backend, _entries(SPLIT)]) == 0
    lines = {x["id"]: x for x in _lines(out / "predictions" / f"condaqa-{SPLIT}-validate.jsonl")}
    base = "condaqa/fewshot_train_1/"
    nine = [f"{base}{510 + i}" for i in range(9)]
    for row_id in world["ids"][:3]:
        assert lines[row_id]["n_shots"] == 9 and lines[row_id]["shots"] == nine
    long_row = lines[world["ids"][3]]
    assert long_row["n_shots"] == 8 and long_row["shots"] == nine[:8]  # the ninth (last) dropped
    assert LONG not in long_row["prompt"] and "Shot 7 is not red." in long_row["prompt"]
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert record["shots_used"] == {"asked": 9, "fewest": 8, "rows": {"9": 3, "8": 1}}
    assert "rows by the number of shots they were shown (9 shots: 3, 8 shots: 1)" in (out / "card.md").read_text()
    # the same record, as a protocol variant, is counted in protocol.md's notes
    from negtrain.evaluation.protocol import protocol_markdown
    from negtrain.io.records import EvalRecord
    from negtrain.prompts.protocols import get_protocol

    text = protocol_markdown(get_protocol("condaqa-fewshot"), [EvalRecord({**record, "variant": "fewshot/1"})], "m", 0, 0)
    assert "- fewshot/1: 9 shots for 3 rows, 8 shots for 1 row (min_shots: 9 shots, 8 where 9 do not fit" in text


def test_without_min_shots_the_same_context_is_an_error(world):
    context = max(world["nine"][:3]) + ROOM
    out = world["tmp"] / "card"
    code = main(["evaluate", "--model", str(_model(world, context)), "--out", str(out), *ARGS,
                 f"--data.eval=[{{benchmark: condaqa, split: {SPLIT}, shots: 9}}]"])
    assert code == 2


@pytest.mark.parametrize("backend", [[], ["--backend", "transformers"]], ids=["hf", "transformers"])
def test_a_row_that_fits_neither_way_fails_before_any_generation_naming_it(world, backend, monkeypatch, capsys):
    context = world["eight"][3] + ROOM - 1  # the long row fits not even with eight shots
    model = _model(world, context)
    monkeypatch.setattr(lm, "load_base", lambda *a, **k: pytest.fail("the weights were loaded before every prompt was checked"))
    monkeypatch.setattr(in_process, "respond_ids", lambda *a, **k: pytest.fail("a generation ran before every prompt was checked"))
    capsys.readouterr()
    # split 2 comes first and fits; the failing row is in the second entry, and nothing was generated for the first
    code = main(["evaluate", "--model", str(model), "--out", str(world["tmp"] / "card"), *ARGS, *backend,
                 _entries("fewshot_test_2", SPLIT)])
    assert code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert f"condaqa/{SPLIT}" in err[0] and f"row {world['ids'][3]} is {world['eight'][3]} tokens" in err[0]
    assert "even with 8 shot(s), the fewest this entry allows (min_shots)" in err[0]
    assert not (world["tmp"] / "card" / "parts" / "condaqa-fewshot_test_2.json").exists()


def test_fit_shots_drops_the_last_shot_first_and_only_where_needed():
    def lengths(prompts):
        return [len(p.text()) for p in prompts]  # one "token" per character

    shots = tuple((f"q{i}", "a") for i in range(3))  # each shot is "qi a" + "\n\n": 6 characters
    prompts = [Prompt("x" * n, shots) for n in (2, 8, 14)]  # 2 + 3*6 = 20, 26, 32 characters
    ids = [["s0", "s1", "s2"]] * 3
    fitted, kept = fit_shots(prompts, ids, lengths, 1, Context(27, "test"), 1, "b/s", ["r0", "r1", "r2"])
    assert [len(p.shots) for p in fitted] == [3, 3, 2] and kept == [["s0", "s1", "s2"]] * 2 + [["s0", "s1"]]
    with pytest.raises(ConfigError, match=r"b/s: .* even with 2 shot\(s\).*row r2 is 26 tokens and its answer needs 1 more"):
        fit_shots(prompts, ids, lengths, 1, Context(26, "test"), 2, "b/s", ["r0", "r1", "r2"])
    # under truncate: left a row over at min_shots keeps its fewest shots (and is cut later)
    fitted, _ = fit_shots(prompts, ids, lengths, 1, Context(20, "test", "left"), 2, "b/s", ["r0", "r1", "r2"])
    assert [len(p.shots) for p in fitted] == [2, 2, 2]


def test_min_shots_must_not_exceed_shots():
    from negtrain.config import validate_recipe

    raw = {"description": "d", "model": {"name": "m", "family": "causal_lm"},
           "data": {"eval": [{"benchmark": "condaqa", "split": SPLIT, "shots": 3, "min_shots": 8}]}}
    with pytest.raises(ConfigError, match=r"min_shots 8 needs a number of shots at least as large \(shots is 3\)"):
        validate_recipe(raw, "recipe.yaml")


def test_protocol_md_counts_the_rows_per_number_of_shots():
    from negtrain.evaluation.protocol import eval_entries, protocol_markdown
    from negtrain.io.records import EvalRecord
    from negtrain.prompts.protocols import get_protocol

    protocol = get_protocol("condaqa-fewshot")
    entries = {e["variant"]: e for e in eval_entries(protocol, chat=False)}
    # the paper's rule is the protocol's: nine shots, eight where nine do not fit, for the in-context rows
    assert {v: (e["shots"], e.get("min_shots")) for v, e in entries.items() if v.startswith(("fewshot/", "cot_answer_only/"))} == \
        {f"{f}/{k}": (9, 8) for f in ("fewshot", "cot_answer_only") for k in range(1, 6)}
    assert all("min_shots" not in e for v, e in entries.items() if v.startswith(("unifiedqa/", "flan_cot/")))
    record = EvalRecord({"epoch": 0, "benchmark": "condaqa", "split": "fewshot_test_4", "variant": "fewshot/4",
                         "metrics": {"accuracy": 0.5, "n": 1446.0},
                         "shots_used": {"asked": 9, "fewest": 8, "rows": {"9": 1443, "8": 3}}})
    text = protocol_markdown(protocol, [record], "m", 0, 0)
    assert ("- fewshot/4: 9 shots for 1443 rows, 8 shots for 3 rows (min_shots: 9 shots, 8 where 9 do not fit the "
            "model's context, the last shot dropped first)") in text

