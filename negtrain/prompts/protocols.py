"""Protocols: a paper's table as one command. ``protocols.yaml`` names each protocol's variants
(benchmark, split, strategy, shots) and the layout of its ``protocol.md``."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from negtrain.errors import ConfigError, unknown_name
from negtrain.prompts.strategies import _check_keys, get_strategy

PATH = Path(__file__).parent / "protocols.yaml"
PROTOCOL_KEYS = ("paper", "table", "variants", "note")
VARIANT_KEYS = ("name", "benchmark", "split", "strategy", "shots", "chat")


@dataclass(frozen=True)
class Variant:
    name: str  # e.g. "conditional_q/few"
    benchmark: str
    split: str
    strategy: str | None
    shots: int | str = 0  # a number, or "paper"
    chat: bool | None = None  # run only with (True) / without (False) --chat; None: always

    @property
    def file_stem(self) -> str:
        """``<benchmark>-<split>-<variant, '/' as '-'>``: its predictions file's name."""
        return f"{self.benchmark}-{self.split}-{self.name.replace('/', '-')}"


@dataclass(frozen=True)
class Protocol:
    name: str
    paper: str
    variants: tuple[Variant, ...]
    columns: tuple[tuple[str, str], ...] = ()
    baseline: str | None = None
    #: Printed under the protocol's table (what its numbers are, and are not).
    note: str = ""
    #: The variants are one format on several disjoint splits, named ``<format>/<split number>``:
    #: protocol.md adds, per format, the mean ± std over the splits and the pooled score
    #: (:mod:`negtrain.across_splits`).
    across_splits: bool = False

    def selected(self, chat: bool) -> list[Variant]:
        return [v for v in self.variants if v.chat is None or v.chat == chat]


def parse_protocols(raw: Any, where: str) -> dict[str, Protocol]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of protocols")
    out = {}
    for name, entry in raw.items():
        w = f"{where}: {name}"
        _check_keys(entry, PROTOCOL_KEYS, w)
        table = _check_keys(entry.get("table") or {}, ("columns", "baseline", "across_splits"), f"{w}.table")
        variants = []
        for i, v in enumerate(entry.get("variants") or []):
            _check_keys(v, VARIANT_KEYS, f"{w}.variants[{i}]")
            shots = v.get("shots", 0)
            if not (shots == "paper" or (isinstance(shots, int) and shots >= 0)):
                raise ConfigError(f"{w}.variants[{i}].shots: 0, 'paper' or a number of drawn shots, not {shots!r}")
            variant = Variant(v["name"], v["benchmark"], v["split"], v.get("strategy"), shots, v.get("chat"))
            if variant.strategy is not None:
                get_strategy(variant.benchmark, variant.strategy)  # a misspelt strategy fails here
            variants.append(variant)
        names = [v.name for v in variants]
        if len(set(names)) != len(names) or not names:
            raise ConfigError(f"{w}: variants need distinct names (got {names})")
        out[name] = Protocol(name, str(entry.get("paper", "")), tuple(variants),
                             tuple((c[0], c[1]) for c in table.get("columns") or []), table.get("baseline"),
                             note=str(entry.get("note", "")).strip(), across_splits=bool(table.get("across_splits", False)))
    return out


@functools.lru_cache(maxsize=1)
def protocols() -> dict[str, Protocol]:
    return parse_protocols(yaml.safe_load(PATH.read_text(encoding="utf-8")), "negtrain/prompts/protocols.yaml")


def get_protocol(name: str) -> Protocol:
    known = protocols()
    if name not in known:
        raise unknown_name("protocol", name, known)
    return known[name]
