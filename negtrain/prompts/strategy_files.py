"""Where a benchmark's prompt strategies are written: the file negtrain ships for it
(``negtrain/prompts/<benchmark>.yaml``) and a file a plugin added (:data:`ADDED_STRATEGY_FILES`,
filled by :func:`negtrain.prompts.strategies.register_strategies`), read as YAML; what a strategy
in them is, and how it is checked, is :mod:`negtrain.prompts.strategies`."""

from __future__ import annotations

from pathlib import Path

import yaml

from negtrain.core.errors import ConfigError
from negtrain.core.plugins import PluginTable

HERE = Path(__file__).parent


def strategy_files() -> dict[str, Path]:
    """benchmark -> its strategy file, for every benchmark that ships one."""
    return {p.stem: p for p in sorted(HERE.glob("*.yaml")) if p.stem != "protocols"}


#: benchmark -> a strategy file kept outside the package (a plugin's), whose strategies join those
#: of the file negtrain ships for it, if any (:func:`register_strategies`). Its first read loads
#: the installed plugins (negtrain.core.plugins).
ADDED_STRATEGY_FILES: PluginTable[str, Path] = PluginTable("strategies", {})


def read_file(benchmark: str, path: Path, shown: str) -> dict:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read the strategy file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{shown}: not valid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(raw, dict) or raw.get("benchmark") != benchmark:
        named = raw.get("benchmark") if isinstance(raw, dict) else None
        raise ConfigError(f"{shown}: names benchmark {named!r}, not {benchmark!r}")
    return raw


def files_of(benchmark: str) -> list[tuple[dict, str]]:
    """The strategy files of ``benchmark``, read: the shipped one, then a plugin's (with the name an error shows)."""
    out = []
    shipped = strategy_files().get(benchmark)
    if shipped is not None:
        out.append((read_file(benchmark, shipped, f"negtrain/prompts/{shipped.name}"), f"negtrain/prompts/{shipped.name}"))
    added = ADDED_STRATEGY_FILES.get(benchmark)
    if added is not None:
        out.append((read_file(benchmark, added, str(added)), str(added)))
    return out
