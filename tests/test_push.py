"""push: through a stand-in for the Hub client only (the Hub is out of reach here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from negtrain import cli

SECRET = "hf_pushTokenValue987654321"


class RecordingHfApi:
    """Replaces huggingface_hub.HfApi at the network boundary; records what would be sent."""

    instances: list["RecordingHfApi"] = []

    def __init__(self, token=None, **kwargs):
        self.token = token
        self.calls: list[tuple] = []
        self.uploaded: dict[str, bytes] = {}
        RecordingHfApi.instances.append(self)

    def whoami(self, token=None, **kwargs):
        self.calls.append(("whoami",))
        return {"name": "someone"}

    def create_repo(self, repo_id, *, private=None, repo_type=None, exist_ok=False, **kwargs):
        self.calls.append(("create_repo", repo_id, private, repo_type, exist_ok))
        return f"https://huggingface.co/{repo_id}"

    def create_branch(self, repo_id, *, branch, repo_type=None, exist_ok=False, **kwargs):
        self.calls.append(("create_branch", repo_id, branch))

    def upload_folder(self, *, repo_id, folder_path, revision=None, repo_type=None, commit_message=None, **kwargs):
        folder = Path(folder_path)
        files = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        self.uploaded.update(files)
        self.calls.append(("upload_folder", repo_id, sorted(files), revision, commit_message))


@pytest.fixture
def hub(monkeypatch):
    RecordingHfApi.instances = []
    monkeypatch.setattr("negtrain.release.push.HfApi", RecordingHfApi)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    return RecordingHfApi


def test_push_creates_repo_and_uploads_the_export(fake_run, hub, capsys):
    code = cli.main(["push", "--run", str(fake_run), "--repo-id", "someone/minilm-scone", "--private", "--revision", "v1"])
    assert code == 0, capsys.readouterr().err
    (api,) = hub.instances
    assert api.token == SECRET
    names = [c[0] for c in api.calls]
    assert names == ["whoami", "create_repo", "create_branch", "upload_folder"]
    assert api.calls[1] == ("create_repo", "someone/minilm-scone", True, "model", True)
    assert api.calls[2] == ("create_branch", "someone/minilm-scone", "v1")
    _, repo_id, files, revision, message = api.calls[3]
    assert repo_id == "someone/minilm-scone" and revision == "v1"
    for required in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                     "README.md", "negtrain_recipe.yaml", "negtrain_export.json"):
        assert required in files
    assert "best-epoch1.ckpt" in message
    card = api.uploaded["README.md"].decode()
    assert yaml.safe_load(card.split("---\n")[1])["model-index"][0]["name"] == "someone/minilm-scone"
    assert 'from_pretrained("someone/minilm-scone")' in card
    for content in api.uploaded.values():
        assert SECRET.encode() not in content
    assert "https://huggingface.co/someone/minilm-scone/tree/v1" in capsys.readouterr().out


def test_missing_token_fails_before_any_work(fake_run, monkeypatch, tmp_path, capsys):
    RecordingHfApi.instances = []
    monkeypatch.setattr("negtrain.release.push.HfApi", RecordingHfApi)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no stored token either
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    import negtrain.release.export

    monkeypatch.setattr(negtrain.release.export, "export", lambda *a, **k: pytest.fail("exported without a token"))
    code = cli.main(["push", "--run", str(fake_run), "--repo-id", "someone/x"])
    err = capsys.readouterr().err
    assert code == 2
    assert "no Hugging Face token" in err and "HF_TOKEN" in err and "hf auth login" in err
    assert RecordingHfApi.instances == []


def test_offline_hub_fails_clearly(fake_run, hub, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(["push", "--run", str(fake_run), "--repo-id", "someone/x"]) == 2
    assert "HF_HUB_OFFLINE" in capsys.readouterr().err
    assert hub.instances == []


def test_unreachable_hub_fails_clearly(fake_run, hub, monkeypatch, capsys):
    def unreachable(self, *a, **k):
        raise ConnectionError("no route to host")

    monkeypatch.setattr(RecordingHfApi, "whoami", unreachable)
    assert cli.main(["push", "--run", str(fake_run), "--repo-id", "someone/x"]) == 2
    assert "unreachable" in capsys.readouterr().err
    assert [c[0] for c in hub.instances[0].calls] == []


def test_bad_repo_id(fake_run, hub, capsys):
    assert cli.main(["push", "--run", str(fake_run), "--repo-id", "no-owner"]) == 2
    assert "OWNER/NAME" in capsys.readouterr().err
