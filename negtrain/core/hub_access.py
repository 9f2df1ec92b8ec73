"""Whether the Hugging Face Hub can be reached, asked once, before anything is loaded from it.

Without this, a recipe naming a Hub model on a machine without network spends a minute in
``huggingface_hub``'s retries (``Retrying in 1s ... 8s``, five times per file, for several files)
and then fails with no hint. Here one request with a short timeout decides:

- the Hub answers: loading goes ahead as usual;
- it does not, and the model is in the local Hugging Face cache: the cached copy is used, with
  offline mode switched on for this process (and its children) so nothing retries;
- it does not, and the model is not cached: one error line naming the model and the ways out.

``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE=1``, which ``huggingface_hub`` also reads) skips the request: a model must then be in the cache.

``huggingface_hub`` is imported inside the functions that use it: the benchmark modules import
this one, and the command line's quick answers (``recipes``, recipe errors) must stay light.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from negtrain.core.errors import ConfigError

#: Seconds to wait for the Hub's answer. A refused connection or a failed DNS lookup answers at
#: once; this bounds a network that drops packets silently.
PROBE_TIMEOUT = 5.0

WAYS_OUT = (
    "use a local copy with --model.name=/path/to/model, set HF_HUB_OFFLINE=1 to load from the "
    "Hugging Face cache, or run an offline recipe (scone_minilm, cuemask_minilm, "
    "mnli_negation_mix_minilm, unlikelihood_minilm; see `negtrain recipes`)"
)


def hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def offline_variable() -> str:
    """The environment variable that switched the Hub's offline mode on, as ``huggingface_hub``
    reads them: ``HF_HUB_OFFLINE`` when it is set to anything, else ``TRANSFORMERS_OFFLINE``
    (offline mode switched on in this process, by :func:`go_offline`, sets ``HF_HUB_OFFLINE``)."""
    if os.environ.get("HF_HUB_OFFLINE") or not os.environ.get("TRANSFORMERS_OFFLINE"):
        return "HF_HUB_OFFLINE"
    return "TRANSFORMERS_OFFLINE"


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


@lru_cache(maxsize=1)
def hub_problem() -> str | None:
    """None when the Hub answers (any HTTP status); else what went wrong, in a few words."""
    from huggingface_hub.utils import get_session

    try:
        get_session().head(f"{endpoint()}/api/models", timeout=PROBE_TIMEOUT, follow_redirects=False)
    except Exception as exc:  # connection refused, DNS, proxy, TLS, timeout: all mean "unreachable"
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {text[:120]}" if text else type(exc).__name__
    return None


def is_cached(repo_id: str) -> bool:
    """Whether the model's config is in the local Hugging Face cache (a previous download)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # not a valid repo id: from_pretrained will say what is wrong with it
        return False


def go_offline() -> None:
    """Hub offline mode for this process and the processes it starts (DDP ranks)."""
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True
    os.environ["HF_HUB_OFFLINE"] = "1"


def is_hub_id(name: str) -> bool:
    """A model name that ``from_pretrained`` would look up on the Hub (not a path, not ``pkg:``)."""
    return not name.startswith("pkg:") and not Path(name).expanduser().exists()


def check_hub_model(name: str, field: str = "model.name") -> None:
    """Fail fast, in one line, when the Hub model ``name`` cannot be loaded on this machine."""
    if not is_hub_id(name):
        return
    if hub_offline():
        if not is_cached(name):
            variable = offline_variable()
            raise ConfigError(
                f"{field} '{name}': not in the local Hugging Face cache, and {variable} is set, so it "
                f"cannot be downloaded; unset {variable} where the Hub is reachable, or "
                f"use a local copy with --{field}=/path/to/model"
            )
        return
    problem = hub_problem()
    if problem is None:
        return
    if is_cached(name):
        print(f"model: the Hugging Face Hub ({endpoint()}) is unreachable ({problem}); using the cached copy of {name}", flush=True)
        go_offline()
        return
    raise ConfigError(
        f"{field} '{name}' is a Hugging Face Hub model, but the Hub ({endpoint()}) is unreachable "
        f"from this machine ({problem}) and the model is not in the local cache; {WAYS_OUT}"
    )


def check_hub_dataset() -> str | None:
    """None when a Hub dataset may be fetched; else why not (for the data file's error)."""
    if hub_offline():
        return f"{offline_variable()} is set"
    problem = hub_problem()
    return f"the Hugging Face Hub ({endpoint()}) is unreachable ({problem})" if problem else None
