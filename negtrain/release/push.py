"""``push``: export a run and upload it to the Hugging Face Hub.

Before any work (no checkpoint is read), the token and the Hub are checked: a missing token
(``HF_TOKEN`` or ``hf auth login``), ``HF_HUB_OFFLINE=1`` or an unreachable Hub each give one
clear error. Then the run is exported into a temporary folder (:func:`negtrain.release.export.export`),
the repository is created if needed (and the branch, with ``revision``), and the folder uploaded
in one commit. The token is never written anywhere: :mod:`negtrain.core.secrets` masks it in the card.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from huggingface_hub import HfApi

from negtrain.core.errors import ConfigError, NegtrainError


def hub_token() -> str | None:
    from huggingface_hub import get_token

    return get_token()


def _check_ready(repo_id: str):
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if repo_id.count("/") != 1:
        raise ConfigError(f"--repo-id '{repo_id}': expected OWNER/NAME")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise ConfigError(f"--repo-id '{repo_id}': {exc}") from exc
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        raise NegtrainError("cannot push: HF_HUB_OFFLINE is set, so the Hugging Face Hub is off limits (unset it to push)")
    token = hub_token()
    if not token:
        raise NegtrainError(
            "cannot push: no Hugging Face token. Set HF_TOKEN, or run `hf auth login` "
            "(a token with write access: https://huggingface.co/settings/tokens)"
        )
    api = HfApi(token=token)
    try:
        user = api.whoami()
    except Exception as exc:  # offline, DNS, proxy, or an invalid token
        kind = type(exc).__name__
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise NegtrainError("cannot push: the Hugging Face token was rejected (401/403); log in again with `hf auth login`") from exc
        raise NegtrainError(f"cannot push: the Hugging Face Hub is unreachable from this machine ({kind})") from exc
    return api, user


def preflight(run_dir: Path, repo_id: str, checkpoint: str = "best") -> HfApi:
    """Every check of a push before torch or transformers load: the run and its checkpoint (before
    the network is touched), the repository id, then the token and the Hub. Returns the Hub
    client ``push`` uploads with. The ``push`` command runs it first, so a refusal answers in about
    a second."""
    from negtrain.runs.reading import RunDir

    RunDir(run_dir).checkpoint(checkpoint)  # a wrong --run fails before the network is touched
    api, _user = _check_ready(repo_id)
    return api


def push(
    run_dir: Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    checkpoint: str = "best",
    merge_adapter: bool = False,
    license: str | None = None,
    api: HfApi | None = None,
) -> str:
    """Export ``run_dir`` and upload it to ``repo_id``; returns the URL of the uploaded tree.
    ``api``: a client :func:`preflight` returned (checked already); else the checks run here."""
    from negtrain.release.export import export

    if api is None:
        api = preflight(run_dir, repo_id, checkpoint)
    with tempfile.TemporaryDirectory(prefix="negtrain-push-") as tmp:
        folder = Path(tmp) / repo_id.split("/")[1]
        done = export(run_dir, folder, checkpoint=checkpoint, merge_adapter=merge_adapter, repo_id=repo_id, license=license)
        api.create_repo(repo_id, private=private, repo_type="model", exist_ok=True)
        if revision:
            api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
        api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type="model",
            revision=revision,
            commit_message=f"negtrain: {done.checkpoint.name} (epoch {done.epoch}) of run {Path(run_dir).resolve().name}",
        )
    tree = f"/tree/{revision}" if revision else ""
    return f"https://huggingface.co/{repo_id}{tree}"
