"""Selecting the rows of a training source by what the benchmark says about each row
(``data.train[].select``), so a paper's ablation that trains on part of a split is a recipe.

A benchmark offers its filters as ``source_filters``: name -> :class:`RowFilter` (the values a row
can have, and how a row's values are read). ``select`` is a list of clauses, each a mapping of
filter names to a value or a list of values; a row is kept when it matches any clause, and it
matches a clause when, for every name in it, one of its values is among the clause's. So TINAD's
Table 7 row "Affirmations + synthetic" (García-Ferrero et al. 2023, §6) is::

    select:
      - {polarity: affirmation}
      - {negation_type: synthetic}

Names and values are checked when the recipe is resolved, with "did you mean".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.core.errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class RowFilter:
    """One attribute of a benchmark's rows that a training source may be selected by."""

    #: Every value a row may have (what a recipe may name).
    values: tuple[Any, ...]
    #: A row's values (a row may have several, e.g. TINAD's three negation types).
    of: Callable[[Example], Sequence[Any]]
    #: What the attribute is, for the error and the docs.
    help: str


def _key(value: Any) -> str:
    return str(value).strip().lower()


def clauses(select: Sequence[Mapping[str, Any]]) -> list[dict[str, set[str]]]:
    """``select`` with every value a list, compared as lower-case text."""
    return [{name: {_key(v) for v in (values if isinstance(values, list) else [values])} for name, values in clause.items()}
            for clause in select]


def check_select(bench: Benchmark, select: Sequence[Mapping[str, Any]], where: str) -> None:
    """Every clause's names and values known to ``bench`` (a one-line error with "did you mean")."""
    filters: Mapping[str, RowFilter] = bench.source_filters
    if not filters:
        raise ConfigError(f"{where}.select: benchmark '{bench.name}' offers no row filters")
    if not select:
        raise ConfigError(f"{where}.select: a list of clauses, e.g. [{{{next(iter(filters))}: ...}}]; leave it out to keep every row")
    for i, clause in enumerate(select):
        if not clause:
            raise ConfigError(f"{where}.select[{i}]: an empty clause would keep every row")
        for name, values in clause.items():
            if name not in filters:
                raise ConfigError(f"{where}.select[{i}]: '{bench.name}' has no row filter '{name}'{did_you_mean(name, filters)}; "
                                  f"its filters: {', '.join(filters)}")
            known = {_key(v): v for v in filters[name].values}
            for value in values if isinstance(values, list) else [values]:
                if _key(value) not in known:
                    shown = [str(v) for v in filters[name].values]
                    raise ConfigError(f"{where}.select[{i}].{name}: unknown value {value!r}{did_you_mean(str(value), shown)}; "
                                      f"{name} ({filters[name].help}) is one of {', '.join(shown)}")


def keeps(bench: Benchmark, chosen: list[dict[str, set[str]]], example: Example) -> bool:
    """Whether ``example`` matches any of the :func:`clauses`."""
    filters = bench.source_filters
    return any(all({_key(v) for v in filters[name].of(example)} & wanted for name, wanted in clause.items()) for clause in chosen)


def select_text(select: Sequence[Mapping[str, Any]]) -> str:
    """``select`` as a short name: ``polarity=affirmation|negation_type=synthetic`` (clauses joined
    by ``|``, a clause's names by ``,``)."""
    return "|".join(",".join(f"{k}={'+'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in clause.items()) for clause in select)


def select_key(select: Sequence[Mapping[str, Any]]) -> str:
    """``select`` as canonical JSON, for cache keys."""
    return json.dumps([{k: sorted(_key(x) for x in (v if isinstance(v, list) else [v])) for k, v in sorted(c.items())} for c in select])
