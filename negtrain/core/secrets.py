"""Keeping API keys and tokens out of everything a run writes.

Recipes have no secret fields, but a secret can still sneak in as a value (``--logger.name=$HF_TOKEN``
by mistake) or through a future field. Everything negtrain writes or sends - ``recipe.yaml``, the
W&B run config, the recorded command, model cards, reports - goes through :func:`redact`, which masks

- the values of environment variables with a secret-looking name (``WANDB_API_KEY``, ``HF_TOKEN``,
  ``*_TOKEN``, ``*_KEY``, ``*SECRET*``, ``*PASSWORD*``, ...) wherever they occur in a string (a
  string that is the secret, or holds it, e.g. a path with a token in it), if the value can be a
  credential at all: at least :data:`MIN_SECRET_LENGTH` characters without whitespace. Shorter
  values are ordinary words too often: with ``MY_API_KEY=entailment`` set, masking it would turn
  a recipe's ``head_labels: [entailment, not_entailment]`` into ``['***', 'not_***']`` and the run
  could no longer be loaded. Every real token is longer (Hugging Face 37 characters, W&B 40,
  OpenAI 51 and more); and
- every secret negtrain was given under another name (:func:`remember_secret`): the API key read
  from the variable ``--api-key-env`` names, whatever that name is (``LLM_BEARER``);
- the credentials of a URL (a text with ``scheme://``): its ``user:password@`` and the value of
  every query (and fragment) parameter, whatever its name (``?accessToken=``, ``?apiToken=``,
  ``?bearer=``, ``?code=``: no list of names is complete); outside a URL, a ``?name=value`` or
  ``&name=value`` whose name is a secret's or a signature's (``?token=...``, ``&sig=...``); and
- the text value of any mapping key with a secret-looking name, in free-form data. A recipe is
  typed and none of its fields is a secret (a test checks every field with a secret-looking name),
  so it is only value-masked: ``recipe.yaml`` must read back as it was written.
"""

from __future__ import annotations

import os
import re
from typing import Any

MASK = "***"
# "token" only as a word of its own: HF_TOKEN and auth_token are secrets, max_new_tokens and
# tokenizer are not.
SECRET_NAME = re.compile(r"(api[_-]?key|(?<![a-z])token(?![a-z])|secret|passw(or)?d|credential|private[_-]?key)", re.IGNORECASE)
#: Shorter values are too likely to be ordinary words or numbers ("entailment", "1") to be masked
#: inside anything written; every real API key and token is longer.
MIN_SECRET_LENGTH = 16
#: Secrets known by value (:func:`remember_secret`), masked like the environment's.
_remembered: set[str] = set()
#: A URL's ``user:password@`` (or ``token@``), up to its last ``@`` before the path (a password
#: may hold an ``@`` of its own).
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s\"'<>`]*@")
#: What ends a URL written inside other text: whitespace, quotes (JSON, YAML), angle brackets.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
#: A query parameter (``?name=value`` or ``&name=value``; ``#name=`` in a URL's fragment); the
#: value stops at a quote, so a URL inside JSON or YAML keeps its closing quote.
_QUERY_PARAM = re.compile(r"(?P<name>[?&;#][^=&#?\s\"'<>`]*=)(?P<value>[^&#;\s\"'<>`]+)")
#: Query parameter names that sign a URL (a pre-signed download): as good as a credential.
_SIGNATURE = re.compile(r"(^|[_.-])(sig|signature|auth|authorization|credential)($|[_.-])", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) or name.upper().endswith("_KEY")


def can_be_secret(value: str) -> bool:
    """Whether an environment value can be a credential: long enough, and one word."""
    return len(value) >= MIN_SECRET_LENGTH and not any(c.isspace() for c in value)


def remember_secret(value: str) -> None:
    """Mask ``value`` from now on in everything this process writes or prints, whatever holds it
    (the API key of a served model, read from a variable of any name). Held to
    :func:`can_be_secret`, as the environment's are: masking a short word everywhere would
    corrupt what is written, and a key that short is a placeholder, not a credential."""
    if can_be_secret(value):
        _remembered.add(value)


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and can_be_secret(v)} | _remembered
    return sorted(values, key=len, reverse=True)


def redact_url_credentials(text: str) -> str:
    """``text`` with every URL's ``user:password@`` and query values masked (the one place a URL
    is masked: everything written or printed comes through here), and outside URLs the values of
    ``?name=`` / ``&name=`` with a secret's name."""
    if "://" in text:
        text = _URL.sub(_mask_url, text)
    if "=" in text:
        text = _QUERY_PARAM.sub(_mask_param, text)
    return text


def _mask_url(m: re.Match) -> str:
    """A URL with its userinfo and every parameter value masked: a key passed in the query is
    named whatever its server names it, so no name is taken for harmless."""
    url = _USERINFO.sub(lambda u: u["scheme"] + MASK + "@", m[0], count=1)
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=-1)
    if cut < 0:
        return url
    return url[:cut] + _QUERY_PARAM.sub(lambda p: p["name"] + MASK, url[cut:])


def _mask_param(m: re.Match) -> str:
    name = m["name"][1:-1]
    if name and (is_secret_name(name) or _SIGNATURE.search(name) or name.lower() in ("key", "sig", "auth")):
        return m["name"] + MASK
    return m[0]


#: How API keys start as their services issue them (Hugging Face, OpenAI and others, GitHub,
#: GitLab, Slack, AWS, Google).
_KEY_PREFIXES = ("hf_", "api_", "sk-", "sk_", "pk_", "rk_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat-",
                 "xoxb-", "xoxp-", "akia", "asia", "ya29.", "aiza")


def looks_like_a_key(name: str) -> bool:
    """Whether a text given as the *name* of an environment variable is a key itself (the token
    pasted where its variable's name goes): a service's key prefix, or one long word mixing upper
    and lower case and digits, as generated keys do and variable names do not."""
    if len(name) < MIN_SECRET_LENGTH:
        return False
    if name.lower().startswith(_KEY_PREFIXES):
        return True
    longest = max((len(part) for part in re.split(r"[_\-.]", name)), default=0)
    return longest >= MIN_SECRET_LENGTH and any(c.isupper() for c in name) and any(c.islower() for c in name) \
        and any(c.isdigit() for c in name)


def key_name_problem(name: str, what: str) -> str | None:
    """The one line refusing a key given where its variable's name goes (the key not echoed, and
    remembered so nothing this process writes holds it), or None."""
    if not looks_like_a_key(name):
        return None
    remember_secret(name)
    return (f"{what}: the value given looks like an API key itself, not the name of an environment variable "
            f"(not shown here, nor written anywhere); export the key as a variable and name that, e.g. "
            f"{what} HF_TOKEN")


def redact_text(text: str, environ: dict[str, str] | None = None) -> str:
    for value in secret_values(environ):
        text = text.replace(value, MASK)
    return redact_url_credentials(text)


def redact(obj: Any, environ: dict[str, str] | None = None, by_key: bool = True) -> Any:
    """A copy of ``obj`` (plain data) with secrets masked.

    ``by_key=False`` masks secret values only, for data whose keys are all known not to be secrets
    (a typed recipe: ``objective.cue_masking.cue_token`` is a word, not a credential)."""
    if isinstance(obj, dict):
        return {
            # Only text can hold a key: a flag or a number under such a name stays readable.
            k: (MASK if by_key and isinstance(k, str) and is_secret_name(k) and isinstance(v, str) and v else redact(v, environ, by_key))
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(v, environ, by_key) for v in obj)
    if isinstance(obj, str):
        return redact_text(obj, environ)
    return obj
