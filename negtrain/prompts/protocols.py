"""Protocols: a paper's table as one command. ``protocols.yaml`` names each protocol's variants
(benchmark, split, strategy, shots) and the layout of its ``protocol.md``."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import yaml

from negtrain.core.errors import ConfigError, unknown_name
from negtrain.prompts.strategies import _check_keys, get_strategy

PATH = Path(__file__).parent / "protocols.yaml"
PROTOCOL_KEYS = ("paper", "table", "variants", "note", "not_reproduced")
NOT_REPRODUCED_KEYS = ("what", "why")
VARIANT_KEYS = ("name", "benchmark", "split", "strategy", "shots", "chat", "optional", "min_shots")
TABLE_KEYS = ("columns", "baseline", "across_splits", "units", "decimals", "tables")
EXTRA_TABLE_KEYS = ("title", "columns", "decimals", "breakdown")
#: How a table prints its values: as the metric's fraction, or times 100 (the paper's percent).
UNITS = ("fraction", "percent")
#: ``across_splits``: ``true`` (mean ± std over the splits and the pooled score) or ``pooled`` (the
#: pooled score only, where the splits are not samples of one size, as TINAD's train/validation/test).
ACROSS_SPLITS = (False, True, "pooled")


@dataclass(frozen=True)
class Column:
    metric: str
    header: str
    #: Not a column of the paper's table: protocol.md marks it as negtrain's addition.
    added: bool = False

    def __iter__(self):
        """``metric, header = column``, as the columns were pairs before ``added``."""
        return iter((self.metric, self.header))


@dataclass(frozen=True)
class ExtraTable:
    """A further table of protocol.md: metric columns over the same rows, or a ``breakdown`` (a
    function of ``negtrain/evaluation/protocol.py``'s ``BREAKDOWNS`` table) with its own rows."""

    title: str
    columns: tuple[Column, ...] = ()
    decimals: int | None = None
    breakdown: str | None = None


@dataclass(frozen=True)
class Variant:
    name: str  # e.g. "conditional_q/few"
    benchmark: str
    split: str
    strategy: str | None
    shots: int | str = 0  # a number, or "paper"
    chat: bool | None = None  # run only with (True) / without (False) --chat; None: always
    #: Run only where its benchmark's files are already on disk (a data dir or the cache), e.g. the
    #: original dev sets of NegNLI's Table 7, which are not mirrored; skipped otherwise, and
    #: protocol.md says why.
    optional: bool = False
    #: The fewest shots a row may drop to where ``shots`` do not fit the model's context (CondaQA's
    #: "sometimes only 8 fit in the context"); None: always ``shots``.
    min_shots: int | None = None

    @property
    def file_stem(self) -> str:
        """``<benchmark>-<split>-<variant, '/' as '-'>``: its predictions file's name."""
        return f"{self.benchmark}-{self.split}-{self.name.replace('/', '-')}"


@dataclass(frozen=True)
class Protocol:
    name: str
    paper: str
    variants: tuple[Variant, ...]
    columns: tuple[Column, ...] = ()
    baseline: str | None = None
    #: Printed under the protocol's table (what its numbers are, and are not).
    note: str = ""
    #: The variants are one format on several disjoint splits, named ``<format>/<split number>``:
    #: protocol.md adds, per format, the mean ± std over the splits and the pooled score
    #: (:mod:`negtrain.evaluation.across_splits`); ``"pooled"``: the pooled score only.
    across_splits: bool | str = False
    #: The paper's units and decimals: "fraction" or "percent" (values times 100).
    units: str = "fraction"
    decimals: int = 2
    #: Further tables, after the main one (e.g. CondaQA's per-edit accuracies, TINAD's Table 5).
    tables: tuple[ExtraTable, ...] = ()
    #: The paper's rows or prompts this protocol does not reproduce, (what, why): listed in protocol.md.
    not_reproduced: tuple[tuple[str, str], ...] = ()

    def selected(self, chat: bool) -> list[Variant]:
        return [v for v in self.variants if v.chat is None or v.chat == chat]


def parse_protocols(raw: Any, where: str) -> dict[str, Protocol]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of protocols")
    out = {}
    for name, entry in raw.items():
        w = f"{where}: {name}"
        _check_keys(entry, PROTOCOL_KEYS, w)
        table = _check_keys(entry.get("table") or {}, TABLE_KEYS, f"{w}.table")
        variants = []
        for i, v in enumerate(entry.get("variants") or []):
            _check_keys(v, VARIANT_KEYS, f"{w}.variants[{i}]")
            shots = v.get("shots", 0)
            if not (shots == "paper" or (isinstance(shots, int) and shots >= 0)):
                raise ConfigError(f"{w}.variants[{i}].shots: 0, 'paper' or a number of drawn shots, not {shots!r}")
            if v.get("optional", False) not in (True, False):
                raise ConfigError(f"{w}.variants[{i}].optional: true or false, not {v['optional']!r}")
            fewest = v.get("min_shots")
            if fewest is not None and not (isinstance(shots, int) and isinstance(fewest, int) and not isinstance(fewest, bool)
                                           and 0 <= fewest <= shots):
                raise ConfigError(f"{w}.variants[{i}].min_shots: a number of shots from 0 to shots ({shots!r}), not {fewest!r}")
            variant = Variant(v["name"], v["benchmark"], v["split"], v.get("strategy"), shots, v.get("chat"), optional=bool(v.get("optional")),
                              min_shots=fewest)
            if variant.strategy is not None:
                get_strategy(variant.benchmark, variant.strategy)  # a misspelt strategy fails here
            variants.append(variant)
        names = [v.name for v in variants]
        if len(set(names)) != len(names) or not names:
            raise ConfigError(f"{w}: variants need distinct names (got {names})")
        units = table.get("units", "fraction")
        if units not in UNITS:
            raise ConfigError(f"{w}.table.units: one of {', '.join(UNITS)}, not {units!r}")
        across = table.get("across_splits", False)
        if across not in ACROSS_SPLITS:
            raise ConfigError(f"{w}.table.across_splits: true, false or pooled, not {across!r}")
        extra = []
        for i, t in enumerate(table.get("tables") or []):
            where_t = f"{w}.table.tables[{i}]"
            _check_keys(t, EXTRA_TABLE_KEYS, where_t)
            if not t.get("title") or not (t.get("columns") or t.get("breakdown")):
                raise ConfigError(f"{where_t}: a title, and columns or a breakdown (whose columns are optional)")
            extra.append(ExtraTable(str(t["title"]), _columns(t.get("columns"), where_t),
                                    _decimals(t.get("decimals"), where_t, None), t.get("breakdown")))
        missing = []
        for i, item in enumerate(entry.get("not_reproduced") or []):
            _check_keys(item, NOT_REPRODUCED_KEYS, f"{w}.not_reproduced[{i}]")
            if not all(isinstance(item.get(k), str) and item[k].strip() for k in NOT_REPRODUCED_KEYS):
                raise ConfigError(f"{w}.not_reproduced[{i}]: a 'what' (the paper's row or prompt) and a 'why', both text")
            missing.append((item["what"].strip(), " ".join(item["why"].split())))
        out[name] = Protocol(name, str(entry.get("paper", "")), tuple(variants),
                             _columns(table.get("columns"), f"{w}.table"), table.get("baseline"),
                             note=str(entry.get("note", "")).strip(), across_splits=across, units=units,
                             decimals=_decimals(table.get("decimals"), f"{w}.table", 2), tables=tuple(extra),
                             not_reproduced=tuple(missing))
    return out


def _columns(raw: Any, where: str) -> tuple[Column, ...]:
    """``[metric, header]`` or ``[metric, header, added]`` (a column the paper's table lacks)."""
    out = []
    for i, c in enumerate(raw or []):
        if not (isinstance(c, list) and len(c) in (2, 3) and all(isinstance(x, str) for x in c)) or (len(c) == 3 and c[2] != "added"):
            raise ConfigError(f"{where}.columns[{i}]: [metric, header] or [metric, header, added], not {c!r}")
        out.append(Column(c[0], c[1], len(c) == 3))
    return tuple(out)


@overload
def _decimals(raw: Any, where: str, default: int) -> int: ...
@overload
def _decimals(raw: Any, where: str, default: None) -> int | None: ...
def _decimals(raw: Any, where: str, default: int | None) -> int | None:
    if raw is None:
        return default
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= 6:
        raise ConfigError(f"{where}.decimals: a whole number from 0 to 6, not {raw!r}")
    return raw


@functools.lru_cache(maxsize=1)
def protocols() -> dict[str, Protocol]:
    return parse_protocols(yaml.safe_load(PATH.read_text(encoding="utf-8")), "negtrain/prompts/protocols.yaml")


def get_protocol(name: str) -> Protocol:
    known = protocols()
    if name not in known:
        raise unknown_name("protocol", name, known)
    return known[name]
