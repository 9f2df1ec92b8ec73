"""Whether a number a paper prints can come out of a protocol's definition, and the arithmetic that
says why not.

A printed cell is a value rounded to the decimals it shows, so it stands for an interval (0.364:
[0.3635, 0.3645]). A protocol's cell is defined by counts, and a check says whether some counts
land in that interval:

- :class:`Share`: some k/n (an accuracy, an error rate, Strict: k of the n scored). Both tie
  rules count (half up, half to even): a value exactly on a boundary fits either neighbour.
- :class:`ClassF1`: some 2·TP / (support + predicted), a class's F1 with its gold support among
  ``total`` pairs (TP <= support, TP <= predicted <= TP + total - support).
- :class:`Mean`: a weighted mean of other printed cells (an "All" or "Overall" cell). Each part is
  itself known only to its interval, so the mean is an interval too; it fits when the two meet.
- :class:`Exact`: a value the protocol computes itself from the data (a baseline row).

Used by :mod:`negtrain.evaluation.paper_tables` (the papers' printed cells) and the notes beside
protocol.md's tables (:func:`notes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction


def decimals_of(printed: str) -> int:
    """The decimals a printed number shows ("96.2": 1, "0.364": 3, "100": 0)."""
    return len(printed.partition(".")[2])


def interval(printed: str) -> tuple[Fraction, Fraction]:
    """The closed interval of exact values that round to ``printed`` (either tie rule)."""
    value, half = Fraction(printed), Fraction(1, 2 * 10 ** decimals_of(printed))
    return value - half, value + half


def shown(value: Fraction, decimals: int) -> str:
    """``value`` rounded half up to ``decimals`` (exact: no binary floating point)."""
    scaled = value * 10**decimals
    units = math.floor(scaled + Fraction(1, 2))
    sign = "-" if units < 0 else ""
    digits = str(abs(units)).rjust(decimals + 1, "0")
    return sign + (f"{digits[:-decimals]}.{digits[-decimals:]}" if decimals else digits)


def share_counts(printed: str, n: int, scale: int = 1) -> list[int]:
    """Every k (0 <= k <= n) whose k/n, times ``scale`` (100 for percent), rounds to ``printed``."""
    lo, hi = interval(printed)
    first, last = max(0, math.ceil(lo * n / scale)), min(n, math.floor(hi * n / scale))
    return list(range(first, last + 1))


def reachable(printed: str, n: int, scale: int = 1) -> bool:
    """Whether some k/n (times ``scale``) rounds to ``printed`` at its own decimals."""
    return bool(share_counts(printed, n, scale))


@dataclass(frozen=True)
class Share:
    """k of ``n`` (times ``scale``): what the protocol's cell counts."""

    n: int
    scale: int = 1
    what: str = ""  # the share's name where a note names it ("accuracy, the micro F1")

    def fits(self, printed: str) -> bool:
        return reachable(printed, self.n, self.scale)

    def arithmetic(self, printed: str) -> str:
        d = decimals_of(printed)
        k = math.floor(Fraction(printed) * self.n / self.scale)
        near = ", ".join(f"{j}/{self.n} = {shown(Fraction(j * self.scale, self.n), d)}" for j in (k, k + 1) if 0 <= j <= self.n)
        return f"{printed} is not k/{self.n} for any k{f' ({self.what})' if self.what else ''}: {near}"


@dataclass(frozen=True)
class ClassF1:
    """A class's F1, 2·TP / (support + predicted), among ``total`` pairs."""

    support: int
    total: int

    def fits(self, printed: str) -> bool:
        lo, hi = interval(printed)
        if lo <= 0:  # TP = 0 gives 0 (with the class in gold, support + predicted > 0)
            return self.support > 0
        for tp in range(1, self.support + 1):
            # lo <= 2·tp/(support + p) <= hi  <=>  2·tp/hi - support <= p <= 2·tp/lo - support
            first = max(tp, math.ceil(Fraction(2 * tp) / hi - self.support))
            last = min(tp + self.total - self.support, math.floor(Fraction(2 * tp) / lo - self.support))
            if first <= last:
                return True
        return False

    def arithmetic(self, printed: str) -> str:
        return f"{printed} is not 2·TP/({self.support} + predicted) for any counts of {self.total} pairs"


@dataclass(frozen=True)
class Mean:
    """The ``weights``-weighted mean of ``parts`` (printed cells), named ``definition`` in a note
    ("support-weighted mean", "macro mean")."""

    definition: str
    parts: tuple[str, ...]
    weights: tuple[int, ...]

    def bounds(self) -> tuple[Fraction, Fraction, Fraction]:
        total = sum(self.weights)
        mid = sum((Fraction(p) * w for p, w in zip(self.parts, self.weights, strict=True)), Fraction(0)) / total
        spread = sum((Fraction(1, 2 * 10 ** decimals_of(p)) * w for p, w in zip(self.parts, self.weights, strict=True)),
                     Fraction(0)) / total
        return mid - spread, mid, mid + spread

    def fits(self, printed: str) -> bool:
        lo, hi = interval(printed)
        low, _, high = self.bounds()
        return low <= hi and lo <= high

    def arithmetic(self, printed: str) -> str:
        low, mid, high = self.bounds()
        d = decimals_of(printed) + 1
        if set(self.weights) == {1}:
            expr = f"({' + '.join(self.parts)})/{len(self.parts)}"
        else:
            expr = f"({' + '.join(f'{p}·{w}' for p, w in zip(self.parts, self.weights, strict=True))})/{sum(self.weights)}"
        return (f"{printed} is not the {self.definition} of its cells: {expr} = {shown(mid, d)}, "
                f"between {shown(low, d)} and {shown(high, d)} for any values the parts round from")


@dataclass(frozen=True)
class Exact:
    """A value the protocol computes from the data alone, ``how`` in words."""

    value: Fraction
    how: str

    def fits(self, printed: str) -> bool:
        lo, hi = interval(printed)
        return lo <= self.value <= hi

    def arithmetic(self, printed: str) -> str:
        d = decimals_of(printed)
        return f"{printed} is not what its definition gives: {self.how} = {shown(self.value, d + 1)}, printed here as {shown(self.value, d)}"


Check = Share | ClassF1 | Mean | Exact


@dataclass(frozen=True)
class Cell:
    """One number a paper's table prints, where a protocol lays that table out.

    ``checks``: the protocol's definition of the cell, every one of which a reproducible cell
    fits; ``others``: definitions the protocol does not use, named in the note when the cell fits
    none of its own (a reader asks "then is it macro?"); ``beside``: the protocol.md table the note
    goes under (``main`` or a breakdown's name)."""

    table: str
    row: str
    column: str
    printed: str
    checks: tuple[Check, ...] = ()
    others: tuple[Check, ...] = ()
    beside: str = "main"
    unchecked: str = ""  # why a cell has no check (it is no count the protocol can know)

    @property
    def where(self) -> str:
        return f"{self.table}, {self.row}, {self.column}"

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.fits(self.printed)]

    def note(self) -> str | None:
        """The note's line for a cell the protocol cannot give, with the arithmetic; None if it can."""
        failed = self.failed()
        if not failed:
            return None
        said = "; ".join(c.arithmetic(self.printed) for c in failed)
        also = [c.arithmetic(self.printed).split(" is not ", 1)[1] for c in self.others if not c.fits(self.printed)]
        return f"- {self.where}: {said}" + "".join(f"; nor {x}" for x in also) + "."


def notes(cells: list[Cell], beside: str) -> list[str]:
    """The lines under a protocol.md table for the printed cells beside it that no run can give."""
    lines = [line for c in cells if c.beside == beside and (line := c.note()) is not None]
    if not lines:
        return []
    return ["", "Printed in the paper but not reachable by this protocol's definition (each cell of the paper's table "
                "is checked: a share must be some k/n of its n, an F1 some 2·TP/(support + predicted), an All or "
                "Overall the mean of its row's printed cells, a baseline what this protocol computes from the data):", *lines]
