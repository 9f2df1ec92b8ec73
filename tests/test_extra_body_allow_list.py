"""``--extra-body`` as an allow-list (issue 55): only fields known to leave the text as it is (and
penalties at their neutral value) are sent unasked; a field one level down (Ollama's ``options``,
vLLM's ``vllm_xargs``, TGI's ``parameters``) is checked as its top-level twin; a look-alike name
(``ſtream``, a fullwidth ``temperature``) is the name it looks like; every other field, known or
not, is refused in one line naming it, unless ``--extra-body-allow`` names it, when the card says
it changed what was scored. Nothing is sent to a server in the refused cases (port 9 answers
nothing)."""

from __future__ import annotations

import json

import pytest

from negtrain.cli import main
from negtrain.core.server_settings import extra_body_problem
from scripted_server import Scripted, well_formed
from test_served_faults import card, one_error


def refused(capsys, tmp_path, body: str) -> str:
    capsys.readouterr()
    assert main(["evaluate", "--model", "m", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                 "--benchmarks", "tinad", "--out", str(tmp_path / "c"), "--extra-body", body]) == 2
    assert not (tmp_path / "c").exists()
    return one_error(capsys.readouterr().err)


@pytest.mark.parametrize("body, named", [
    ('{"options": {"temperature": 1.5, "num_predict": 1}}', "options.temperature is set by negtrain itself"),
    ('{"vllm_xargs": {"seed": 3}}', "vllm_xargs.seed is set by negtrain itself"),
    ('{"parameters": {"max_tokens": 1}}', "parameters.max_tokens is set by negtrain itself"),
    ('{"options": {"num_predict": 1}}', "options.num_predict would change what is scored"),
    ('{"parameters": {"top_k": 40}}', "parameters.top_k would change what is scored"),
])
def test_a_field_one_level_down_is_checked_as_its_top_level_twin(lm_env, tmp_path, capsys, body, named):
    assert named in refused(capsys, tmp_path, body)


@pytest.mark.parametrize("body, named", [
    ('{"\u017ftream": true}', "\u017ftream (read as stream) is set by negtrain itself"),
    ('{"\u017feed": 1}', "\u017feed (read as seed) is set by negtrain itself"),
    ('{"\uff54\uff45\uff4d\uff50\uff45\uff52\uff41\uff54\uff55\uff52\uff45": 1.5}', "(read as temperature) is set by negtrain itself"),
])
def test_a_look_alike_name_is_the_name_it_looks_like(lm_env, tmp_path, capsys, body, named):
    assert named in refused(capsys, tmp_path, body)


@pytest.mark.parametrize("field, value", [
    ("bad_words", ["no"]), ("documents", [{"text": "x"}]), ("n_keep", 4), ("repeat_last_n", 0),
    ("response_fields", ["content"]), ("reasoning_effort", "low"), ("min_keep", 2), ("some_new_field", 1),
])
def test_a_field_not_known_to_leave_the_text_as_it_is_is_refused(lm_env, tmp_path, capsys, field, value):
    line = refused(capsys, tmp_path, json.dumps({field: value}))
    assert line.startswith("error:") and f"{field} would change what is scored" in line and "--extra-body-allow" in line


def test_the_allow_list_and_neutral_values_pass_and_allow_names_a_nested_field():
    assert extra_body_problem({"id_slot": 1, "user": "me", "priority": 2, "options": {"repeat_penalty": 1.0}}) is None
    assert "options.repeat_penalty" in extra_body_problem({"options": {"repeat_penalty": 1.1}})
    assert extra_body_problem({"options": {"num_predict": 1}}, ["num_predict"]) is None  # by its name
    assert extra_body_problem({"options": {"num_predict": 1}}, ["options.num_predict"]) is None  # by its path
    assert extra_body_problem({"\uff4e_keep": 1}, ["n_keep"]) is None  # allow names compared as normalised too
    assert "set by negtrain itself" in extra_body_problem({"options": {"Temperature": 0}}, ["temperature"])  # never


def test_a_nested_field_let_through_is_named_on_the_card():
    from negtrain.config import validate_recipe
    from negtrain.evaluation.card_render import chat_template_line

    raw = {"description": "x", "model": {"name": "m", "family": "causal_lm"}, "data": {"eval": [{"benchmark": "tinad", "split": "test"}]},
           "evaluation": {"backend": "openai", "server": {"base_url": "http://x/v1", "extra_body_allow": ["num_predict"],
                                                          "extra_body": {"options": {"num_predict": 8, "repeat_penalty": 1.0}}}}}
    line = chat_template_line(validate_recipe(raw, "test"))
    assert line.endswith("; of these, options.num_predict change what is scored (--extra-body-allow).")


def test_a_nested_neutral_field_is_sent_as_given(lm_env, tmp_path):
    with Scripted(lambda n, path, body: well_formed(body, "no")) as server:
        assert card(server.url, tmp_path / "c", "--extra-body", '{"options": {"repeat_penalty": 1.0}}', "--strategy", "generate") == 0
        sent = [r["body"] for r in server.requests if "echo" not in r["body"]]
    assert sent and all(b["options"] == {"repeat_penalty": 1.0} and b["temperature"] == 0 for b in sent)
