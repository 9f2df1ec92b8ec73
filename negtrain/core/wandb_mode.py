"""What a W&B run would do on this machine (online, offline, disabled), read from the environment
and ~/.netrc alone: ``sweep`` asks it before deciding whether to create a sweep, and must answer
in about a second, so this imports neither wandb nor Lightning."""

from __future__ import annotations

import netrc
import os
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "https://api.wandb.ai"


def has_wandb_key() -> bool:
    """Whether W&B could authenticate without asking: an API key in the environment or in the
    netrc file (``NETRC``, else ~/.netrc) for the W&B host, as wandb itself reads it."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = urlsplit(os.environ.get("WANDB_BASE_URL", DEFAULT_BASE_URL)).hostname or ""
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        auth = netrc.netrc(str(path)).authenticators(host)
    except (OSError, netrc.NetrcParseError):  # no netrc, or one that cannot be read
        return False
    return bool(auth and auth[2])


def wandb_mode() -> str:
    """``online``, ``offline`` or ``disabled``: what a W&B run will do on this machine."""
    mode = os.environ.get("WANDB_MODE", "").strip().lower()
    if mode == "disabled" or os.environ.get("WANDB_DISABLED", "").lower() in {"1", "true", "yes"}:
        return "disabled"
    if mode in {"offline", "dryrun"}:
        return "offline"
    return "online" if has_wandb_key() else "offline"
