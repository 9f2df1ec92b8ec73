"""What a W&B run would do here, read without importing wandb (negtrain/core/wandb_mode.py):
``sweep`` asks it and must answer in about a second."""

from __future__ import annotations

import subprocess
import sys

from negtrain.core.wandb_mode import has_wandb_key, wandb_mode


def _clean(monkeypatch, tmp_path):
    for var in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_DISABLED", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))


def test_a_netrc_entry_for_the_wandb_host_is_a_key(monkeypatch, tmp_path):
    _clean(monkeypatch, tmp_path)
    assert not has_wandb_key() and wandb_mode() == "offline"  # no netrc file at all
    (tmp_path / "netrc").write_text("machine example.org login user password secret\n")
    assert not has_wandb_key()  # another host's entry is not W&B's
    (tmp_path / "netrc").write_text("machine api.wandb.ai login user password secret\n")
    assert has_wandb_key() and wandb_mode() == "online"
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")  # a self-hosted server
    assert not has_wandb_key()
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_mode() == "disabled"


def test_the_environment_decides_first(monkeypatch, tmp_path):
    _clean(monkeypatch, tmp_path)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_mode() == "online"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_mode() == "offline"


def test_asking_imports_neither_wandb_nor_lightning():
    code = ("import sys; from negtrain.core.wandb_mode import wandb_mode; wandb_mode(); "
            "print(sorted(m for m in ('wandb', 'lightning', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
