"""Evaluation numbers do not depend on the machine: under ``trainer.precision: auto`` a model is
evaluated in its own (checkpoint) dtype with no autocast, also where the hardware computes bf16
natively (where ``auto`` trains in bf16-mixed). A lower precision is an explicit setting, and
every record of such a run says so."""

from __future__ import annotations

import json

import pytest

import negtrain.training.checks as checks
from negtrain.cli import main
from negtrain.config import TrainerConfig
from negtrain.training.run import stage_precision

FAST = ["--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1", "--evaluation.bootstrap=0"]


@pytest.fixture
def bf16_native(monkeypatch):
    """This CPU reported as computing bf16 natively (AVX512-BF16/AMX): the path on which ``auto``
    picks bf16-mixed, forced so the tests mean the same on a CPU without it."""
    monkeypatch.setattr(checks, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(checks, "cuda_available", lambda: False)


def test_auto_trains_in_bf16_where_native_but_evaluates_in_the_models_own_dtype(bf16_native):
    auto = TrainerConfig(precision="auto")
    assert stage_precision(auto, "fit")[0] == "bf16-mixed"
    for stage in ("validate", "test"):
        assert stage_precision(auto, stage) == ("32-true", None)
    # An explicit lower precision is kept for evaluation.
    assert stage_precision(TrainerConfig(precision="bf16-mixed"), "validate")[0] == "bf16-mixed"


def _responses(out):
    found = {}
    for path in sorted((out / "predictions").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            found[(path.name, row["id"])] = row["response"]
    return found


def _card(model, out, *extra):
    code = main(["evaluate", "--model", str(model), "--family", "causal_lm", "--benchmarks", "scone",
                 "--out", str(out), *FAST, *extra])
    assert code == 0
    return out


#: No fp32 rescoring of near ties, which would hide what bf16 computes (every row of this random
#: model is a near tie).
NO_RECHECK = "--model.fp32_recheck_margin=0"


def test_default_precision_gives_fp32s_responses_on_a_bf16_native_cpu(lm_env, tmp_path, bf16_native):
    """The tiny Llama is saved in fp32: the default card's responses (each label's verbalizer
    log-likelihood, to 4 decimals) are 32-true's, and bf16-mixed (what ``auto`` picks for training
    here) gives other ones, so this test fails if evaluation took bf16 from the hardware. (On whole
    prompts this tiny model's greedy text is the same in bf16; the slow test below compares the
    generated texts of a whole scone-icl card.) The bf16 card's records and card say how it was
    computed."""
    default = _responses(_card(lm_env["llama"], tmp_path / "default", NO_RECHECK))
    fp32 = _responses(_card(lm_env["llama"], tmp_path / "fp32", NO_RECHECK, "--trainer.precision=32-true"))
    assert default == fp32 and len(default) == 6  # one whole contrast set (a row limit keeps whole sets)
    bf16_out = _card(lm_env["llama"], tmp_path / "bf16", NO_RECHECK, "--trainer.precision=bf16-mixed")
    assert _responses(bf16_out) != default
    record = json.loads((bf16_out / "metrics.jsonl").read_text().splitlines()[0])
    assert "trainer.precision bf16-mixed (set explicitly)" in record["note"]
    assert "trainer.precision bf16-mixed (set explicitly)" in (bf16_out / "card.md").read_text()
    assert "note" not in json.loads((tmp_path / "default" / "metrics.jsonl").read_text().splitlines()[0])
    provenance = json.loads((tmp_path / "default" / "provenance.json").read_text())
    assert provenance["precision"] == "32-true"


@pytest.mark.slow
def test_scone_icl_card_default_precision_equals_32_true_on_a_bf16_native_cpu(lm_env, tmp_path, bf16_native):
    """The whole ``scone-icl`` protocol (12 variants, the reasoning ones 256 tokens long)."""
    runs = {}
    for name, extra in (("default", []), ("fp32", ["--trainer.precision=32-true"])):
        out = tmp_path / name
        code = main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--protocol", "scone-icl",
                     "--out", str(out), *FAST, *extra])
        assert code == 0
        runs[name] = _responses(out)
    assert runs["default"] == runs["fp32"] and len(runs["default"]) == 72  # 12 variants × one whole contrast set
