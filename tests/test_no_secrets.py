"""A run never writes out someone's tokens.

Tokens are planted in the environment (HF_TOKEN, WANDB_API_KEY, and other secret-named
variables) and, by mistake, in the recipe itself (the description and an override). A real
`fit` runs, is resumed (already complete), exported, and reported; then every file it wrote -
including the members of each checkpoint (the recipe stored in it) - and everything it printed is
searched for the tokens.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path


from negtrain.cli import main

SECRETS = {
    "HF_TOKEN": "hf_plantedTokenValue0123456789",
    "WANDB_API_KEY": "planted-wandb-key-0123456789abcdef",
    "MY_SERVICE_SECRET": "planted-service-secret-42xyz",
    "DB_PASSWORD": "planted-password-9876",
}


def _contents(path: Path) -> list[bytes]:
    data = path.read_bytes()
    out = [data]
    if zipfile.is_zipfile(path):  # a checkpoint: search its members as stored
        with zipfile.ZipFile(path) as z:
            out += [z.read(name) for name in z.namelist()]
    return out


def test_planted_tokens_appear_in_no_file_and_no_output(tmp_path, monkeypatch, capsys, data_dir):
    sys.path.insert(0, str(Path(__file__).parent))
    from crash_fit import tiny_model

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    model = tiny_model(tmp_path / "tiny")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"description: 'oops, pasted my token {SECRETS['HF_TOKEN']} here'\n"
        f"model: {{name: {model}, max_length: 32}}\n"
        "data:\n"
        "  train: [{benchmark: monli, split: train}]\n"
        "  eval: [{benchmark: monli, split: test}]\n"
        "  batch_size: 8\n"
        "trainer: {max_epochs: 2, limit_train_batches: 2, precision: 32-true, enable_progress_bar: false, torch_threads: 1}\n"
        "selection: {metric: monli/test/accuracy, allow_test_split: true}\n"
    )
    run = tmp_path / "run"
    out = tmp_path / "export"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(run), f"--logger.group=g-{SECRETS['WANDB_API_KEY']}",
                 f"--logger.name={SECRETS['MY_SERVICE_SECRET']}"]) == 0
    assert main(["fit", "--resume", str(run)]) == 0
    assert main(["export", "--run", str(run), "--out", str(out), "--checkpoint", "last"]) == 0
    assert main(["report", "--run", str(run)]) == 0
    printed = capsys.readouterr()

    written = [p for folder in (run, out) for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".ckpt" for p in written) and (run / "recipe.yaml") in written and (out / "README.md") in written
    for value in SECRETS.values():
        for path in written:
            for blob in _contents(path):
                assert value.encode() not in blob, f"{value} leaked into {path.relative_to(tmp_path)}"
        assert value not in printed.out and value not in printed.err
    # The masking is visible where the token was: the recipe says it was redacted.
    assert "***" in (run / "recipe.yaml").read_text()


def test_a_served_cards_api_key_appears_in_no_file_and_no_output(lm_env, tmp_path, monkeypatch, capsys):
    """The served-model backend's key (read from the variable --api-key-env names) reaches the
    server's Authorization header and nothing else: not recipe.yaml, the response cache, the
    card, the metrics or what is printed, also when a request fails."""
    sys.path.insert(0, str(Path(__file__).parent))
    from served_standin import StandIn

    canary = "sk-canaryServedKey-0123456789abcdef"
    monkeypatch.setenv("SERVED_API_KEY", canary)
    out, cache = tmp_path / "card", tmp_path / "shared-cache"
    with StandIn(lm_env["llama"]) as server:
        assert main(["evaluate", "--model", str(lm_env["llama"]), "--backend", "openai", "--base-url", server.url, "--benchmarks", "tinad",
                     "--api-key-env", "SERVED_API_KEY", "--out", str(out), "--cache", str(cache)]) == 0
        assert set(server.auth) == {f"Bearer {canary}"}
    with StandIn(lm_env["llama"], always=401) as server:
        assert main(["evaluate", "--model", str(lm_env["llama"]), "--backend", "openai", "--base-url", server.url, "--benchmarks", "tinad",
                     "--api-key-env", "SERVED_API_KEY", "--out", str(tmp_path / "refused")]) == 2
    printed = capsys.readouterr()
    assert "HTTP 401" in printed.err and "log-probabilities" not in printed.err
    # A server quoting the key back in its error, the key in a variable with no secret-looking
    # name: the error line masks it all the same.
    monkeypatch.setenv("MYSERVER", canary)
    with StandIn(lm_env["llama"], always=500, echo_auth=True) as server:
        assert main(["evaluate", "--model", str(lm_env["llama"]), "--backend", "openai", "--base-url", server.url, "--benchmarks", "tinad",
                     "--api-key-env", "MYSERVER", "--retries", "0", "--out", str(tmp_path / "echoed")]) == 2
    echoed = capsys.readouterr()
    assert "stand-in says 500 to Bearer ***" in echoed.err
    said = printed.out + printed.err + echoed.out + echoed.err
    written = [p for folder in (out, cache, tmp_path / "refused", tmp_path / "echoed") for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in written) and (out / "card.md") in written
    for path in written:
        assert canary.encode() not in path.read_bytes(), path
    assert canary not in said
    assert "key_env: SERVED_API_KEY" in (out / "recipe.yaml").read_text()
