"""No key in any file (issue 55): every query parameter value and the userinfo of a URL are masked
wherever a URL is written (the one masking function, negtrain/core/secrets.py), whatever the
parameter's name; a key given where its variable's name goes (``--api-key-env hf_...``) is refused
without being echoed."""

from __future__ import annotations

import json

import pytest

from negtrain.cli import main
from negtrain.core.secrets import looks_like_a_key, redact_text
from scripted_server import Scripted

TOKEN = "Zq8s0RkT2mVbX4yLw6PnH1cJ"


@pytest.mark.parametrize("url,masked", [
    (f"http://127.0.0.1:8000/v1?accessToken={TOKEN}", "http://127.0.0.1:8000/v1?accessToken=***"),
    (f"http://h/v1?apiToken={TOKEN}&x=1", "http://h/v1?apiToken=***&x=***"),
    (f"https://h/v1?bearer={TOKEN}", "https://h/v1?bearer=***"),
    (f"https://h/v1?code={TOKEN}#access_token={TOKEN}", "https://h/v1?code=***#access_token=***"),
    (f"https://h/file?X-Amz-Credential={TOKEN}&X-Amz-Signature=ab12", "https://h/file?X-Amz-Credential=***&X-Amz-Signature=***"),
    (f"https://bob:p@ss{TOKEN}@h/v1", "https://***@h/v1"),
    (f"https://{TOKEN}@h/v1?q={TOKEN}", "https://***@h/v1?q=***"),
])
def test_every_query_value_and_the_userinfo_of_a_url_are_masked(url, masked):
    assert redact_text(url) == masked
    assert redact_text(f"base_url: {url}\n") == f"base_url: {masked}\n"
    # Inside JSON the closing quote stays: what is written still reads back.
    assert json.loads(redact_text(json.dumps({"base_url": url}))) == {"base_url": masked}


def test_text_that_is_no_url_keeps_its_equals_signs():
    for text in ("head_labels: [entailment, not_entailment]", "a=b&c=d", "Is x=1? yes", "http://127.0.0.1:8000/v1"):
        assert redact_text(text) == text
    assert redact_text(f"?token={TOKEN}") == "?token=***"  # a secret's name, outside a URL too


def test_a_key_in_the_base_urls_query_reaches_no_file_and_no_output(lm_env, tmp_path, capsys, monkeypatch):
    """The query parameter's name is none of the secret names (the other names: the test above)."""
    out = tmp_path / "card"
    with Scripted() as server:
        url = f"{server.url}?accessToken={TOKEN}"
        monkeypatch.setattr("sys.argv", ["negtrain", "evaluate", "--base-url", url])
        assert main(["evaluate", "--model", "served-model", "--backend", "openai", "--base-url", url, "--benchmarks", "tinad",
                     "--out", str(out), "--concurrency", "1", "--retries", "0"]) == 0
    said = capsys.readouterr()
    assert TOKEN not in said.out + said.err
    assert "?accessToken=***" in (out / "recipe.yaml").read_text() and "?accessToken=***" in (out / ".negtrain.lock").read_text()
    for path in out.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("given", ["hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456", "sk-proj-" + TOKEN, TOKEN])
def test_a_key_given_as_the_variables_name_is_refused_unechoed(lm_env, tmp_path, capsys, given):
    out = tmp_path / "card"
    assert main(["evaluate", "--model", "served-model", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                 "--benchmarks", "tinad", "--api-key-env", given, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --api-key-env: the value given looks like an API key itself"), err
    assert given not in err
    assert not out.exists() or all(given.encode() not in p.read_bytes() for p in out.rglob("*") if p.is_file())


def test_variable_names_are_not_keys():
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "LLM_BEARER", "MY_SERVICE_SECRET_KEY_2024", "myServerKey", "AZURE_OPENAI_API_KEY_WESTEUROPE"):
        assert not looks_like_a_key(name), name


def test_a_recipes_key_env_holding_a_key_is_refused_unechoed(tmp_path):
    from negtrain.core.errors import ConfigError
    from negtrain.recipes import load_recipe

    key = "sk-" + TOKEN
    path = tmp_path / "r.yaml"
    path.write_text("description: t\nmodel: {name: gpt2}\ndata: {eval: [{benchmark: monli, split: test}]}\n"
                    f"evaluation: {{backend: openai, server: {{base_url: 'http://h/v1', key_env: {key}}}}}\n")
    with pytest.raises(ConfigError) as caught:
        load_recipe(str(path))
    assert "looks like an API key itself" in str(caught.value) and key not in str(caught.value)
