"""ScoNe-NLI (She et al. 2023): scoped negation, six conditions, two-way NLI.

Rows with the same position in the six condition files of a split form one contrast set.
``one_scoped.csv`` holds the pair in ``sentence1``/``sentence2``/``gold_label``; the other five
files hold it in the ``*_edited`` columns (upstream README). Each file's unnamed first column is
the row number, and must be: a row whose index is anything else is malformed. Every contrast set must be complete:
condition files of different lengths (one cut short, one with an extra row) are an error, not
sets of five scored as if they were sets of six.

ScoNe publishes a train and a test split, no dev split. ``train90`` / ``dev10`` carve one from
train: the training contrast sets ordered by the SHA-256 of ``"scone/train/<row>"`` (a fixed order,
the same on every machine and library version, never splitting a contrast set), the first 90% to
train on and the last 10% to select an epoch on. Their rows keep their ``scone/train/...`` ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from negtrain.core import labels as nli
from negtrain.benchmarks.base import NliBenchmark, Example
from negtrain.benchmarks.rows import Row, local, read_csv
from negtrain.benchmarks.files import RemoteFile
from negtrain.core.errors import DataError
from negtrain.metrics.declared import count, scores

if TYPE_CHECKING:
    from negtrain.metrics.scone import SconeMetric

CONDITIONS = (
    "no_negation",
    "one_not_scoped",
    "one_scoped",
    "one_scoped_one_not_scoped",
    "two_scoped",
    "two_not_scoped",
)
REPO = "selenashe/ScoNe"


#: The header of ScoNe's first column: the row number (as pandas wrote it), 0, 1, 2, ...
INDEX_COLUMN = ""


def check_row_number(row: Row) -> None:
    """The unnamed first column is the row's number; anything else is a malformed row (a shifted,
    duplicated or foreign row, or a broken quote that swallowed text into it)."""
    if INDEX_COLUMN not in row.fields:
        raise DataError(f"{row.path}:1: no index column (the unnamed first column, numbering the rows 0, 1, 2, ...)")
    value = row.fields[INDEX_COLUMN]
    if value != str(row.index):
        text = "" if value is None else str(value)
        shown = repr(text) if len(text) <= 40 else f"a {len(text):,}-character value starting {text[:20]!r}"
        raise DataError(f"{row.path}:{row.line}: field '' (the index column): {shown} is not the row number {row.index}")


def _check_complete(split: str, rows: dict[str, int], paths: dict) -> None:
    """Every contrast set has all six conditions: the six files have the same number of rows."""
    full = max(rows.values())
    short = [c for c in CONDITIONS if rows[c] < full]
    if short:
        c = short[0]
        longest = max(CONDITIONS, key=lambda k: rows[k])
        missing = f"scone/{split}/{rows[c]}" + (f" to scone/{split}/{full - 1}" if full - rows[c] > 1 else "")
        raise DataError(
            f"{paths[c]}: {rows[c]} rows, but {paths[longest].name} has {full}: contrast set(s) {missing} "
            f"lack the {c} member ({len(short)} of the 6 condition files are short: {', '.join(short)}); "
            "every contrast set needs all six conditions"
        )


#: A split carved from train -> the (first, last) fraction of the hashed order of train's contrast sets it takes.
CARVED = {"train90": (0.0, 0.9), "dev10": (0.9, 1.0)}


def carved_rows(split: str, sets: int) -> set[int]:
    """The row numbers (contrast sets) of train that the carved ``split`` holds, of ``sets`` in all."""
    order = sorted(range(sets), key=lambda row: hashlib.sha256(f"scone/train/{row}".encode()).hexdigest())
    lo, hi = CARVED[split]
    return set(order[round(lo * sets) : round(hi * sets)])


class Scone(NliBenchmark):
    name = "scone"
    splits = ("train", "test", *CARVED)
    contains = {"train": tuple(CARVED)}
    labels = nli.NLI2
    reported_metrics = (*scores(["accuracy", *(f"accuracy/{c}" for c in CONDITIONS), "consistency"]), count("groups_scored"), count("n"))
    citation = (
        "She, Potts, Bowman, Geiger (2023). ScoNe: Benchmarking Negation Reasoning in Language "
        "Models With Fine-Tuning and In-Context Learning. ACL 2023."
    )

    def files(self, split: str) -> list[RemoteFile]:
        split = "train" if split in CARVED else split
        return [RemoteFile(REPO, f"scone_nli/{split}/{c}.csv") for c in CONDITIONS]

    def read(self, split: str) -> list[Example]:
        if split in CARVED:
            rows = self.read("train")
            keep = carved_rows(split, len(rows) // len(CONDITIONS))
            return [e for e in rows if int(str(e.group).rsplit("/", 1)[1]) in keep]  # read("train") gives every row its group
        examples = []
        rows_per_file: dict[str, int] = {}
        paths = {}
        for condition, file in zip(CONDITIONS, self.files(split), strict=False):
            suffix = "" if condition == "one_scoped" else "_edited"
            cols = (f"sentence1{suffix}", f"sentence2{suffix}", f"gold_label{suffix}")
            for row in read_csv(local(file), required=cols):
                check_row_number(row)
                raw = row.get(cols[2])
                label = nli.into(nli.normalize(raw) or "", self.labels)
                if label is None:
                    raise row.error(cols[2], f"label '{raw}' is not an NLI label")
                examples.append(
                    Example(
                        id=f"scone/{split}/{condition}/{row.index}",
                        inputs=(row.get(cols[0]), row.get(cols[1])),
                        label=label,
                        subset=condition,
                        group=f"scone/{split}/{row.index}",
                    )
                )
                rows_per_file[condition] = row.index + 1
            paths[condition] = row.path
        _check_complete(split, rows_per_file, paths)
        return examples

    def metric(self, examples: Sequence[Example]) -> SconeMetric:
        from negtrain.metrics.scone import SconeMetric  # torch: imported when scoring, not when listing

        return SconeMetric(
            labels=[self.labels.index(e.label) for e in examples],
            subsets=[e.subset for e in examples],
            groups=[e.group for e in examples],
            subset_order=CONDITIONS,
        )
