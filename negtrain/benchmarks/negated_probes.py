"""Negated factual probes in the negated-LAMA format (Kassner & Schütze 2020; Hosseini et al. 2021).

Each JSON line holds ``masked_sentences`` (an affirmative sentence with one ``[MASK]``),
``masked_negations`` (its negation, same mask) and ``obj_label`` (the object that is true in the
affirmative). As in LAMA both sentence fields may be lists; their i-th entries form one probe.
Every probe becomes two examples, ``<id>/affirmative`` and ``<id>/negated``, in the subsets of the
same names; the gold label of both is ``obj_label``. The ``[MASK]`` literal is kept in the text;
models map it to their own mask token.

Metrics (Hosseini et al. 2021):

- ``negated_top1_error``: the fraction of negated probes whose top-1 prediction at the mask is
  ``obj_label`` (the paper's headline number; lower is better);
- ``affirmative_top1_accuracy``: the fraction of affirmative probes whose top-1 prediction is
  ``obj_label``, so that forgetting is visible.

A prediction is a token string; it is right when it equals ``obj_label`` exactly (case-sensitive,
surrounding whitespace ignored). Predictions are open-vocabulary, so ``negtrain evaluate`` accepts
any string.

Files. Negated LAMA has no train/test split and is not on GitHub (it ships in the LAMA data
archive), so this benchmark reads the probes from ``negated-probes/<split>.jsonl`` in a data
directory (``NEGTRAIN_DATA_DIR``); nothing is downloaded. Put the training probes in
``train.jsonl`` and held-out probes in ``test.jsonl``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.core.errors import DataError
from negtrain.metrics.declared import count, score

if TYPE_CHECKING:
    from negtrain.metrics.probes import ProbeMetric

MASK = "[MASK]"
AFFIRMATIVE, NEGATED = "affirmative", "negated"


@dataclass(frozen=True)
class LocalDataFile:
    """A file that only a data directory can hold (there is no public download)."""

    relpath: Path
    note: str

    @property
    def origin(self) -> str:
        return f"{self.relpath} ({self.note})"

    def download(self, target: Path) -> None:
        raise OSError("no public download for this file")


def _sentences(row, name: str) -> list[str]:
    value = row.get(name)
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(s, str) and s.strip() for s in items):
        raise row.error(name, "expected a sentence or a non-empty list of sentences")
    for s in items:
        if s.count(MASK) != 1:
            raise row.error(name, f"expected exactly one {MASK} in {s!r}")
    return items


class NegatedProbes(Benchmark):
    name = "negated_probes"
    splits = ("train", "test")
    labels = ()  # open vocabulary: the label is the object string
    reported_metrics = (
        score("negated_top1_error", lower_is_better=True),
        score("affirmative_top1_accuracy"),
        count("n_negated"),
        count("n_affirmative"),
    )
    #: Predictions are free token strings, not labels of a closed set.
    open_vocabulary = True
    prediction_help = "a token string"
    how_scored = {"mlm": "top-1 token at the [MASK] of the affirmative and the negated cloze"}
    refuses = {
        "nli": "cloze probes with open-vocabulary answers, not premise/hypothesis pairs",
        "seq2seq": "a [MASK] cloze needs a masked language model's prediction at the mask",
        "causal_lm": "a [MASK] cloze needs a masked language model's prediction at the mask",
    }

    def normalize_prediction(self, value) -> str | None:
        return value.strip() if isinstance(value, str) else None
    citation = (
        "Kassner, Schütze (2020). Negated and Misprimed Probes for Pretrained Language Models. ACL 2020. "
        "Hosseini, Reddy, Bahdanau, Hjelm, Sordoni, Courville (2021). Understanding by Understanding "
        "Not: Modeling Negation in Language Models. NAACL 2021."
    )

    def files(self, split: str) -> list[LocalDataFile]:
        return [LocalDataFile(Path("negated-probes") / f"{split}.jsonl", "negated-LAMA-format probes; no public download")]

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            aff = _sentences(row, "masked_sentences")
            neg = _sentences(row, "masked_negations")
            if len(aff) != len(neg):
                raise row.error("masked_negations", f"{len(neg)} negations for {len(aff)} masked_sentences")
            obj = row.get("obj_label")
            if not isinstance(obj, str):
                raise row.error("obj_label", f"expected a string, got {obj!r}")
            obj = obj.strip()
            for k, (a, n) in enumerate(zip(aff, neg, strict=False)):
                probe = f"{self.name}/{split}/{row.index}" + (f".{k}" if len(aff) > 1 else "")
                meta = {"line": row.line, "file": str(row.path)}
                for subset, text in ((AFFIRMATIVE, a), (NEGATED, n)):
                    examples.append(Example(f"{probe}/{subset}", (text,), obj, subset=subset, group=probe, meta=meta))
        return examples

    def metric(self, examples: Sequence[Example], predicted_labels: Sequence[str] | None = None) -> ProbeMetric:
        space = list(predicted_labels or sorted({e.label for e in examples}))
        lookup = {token: i for i, token in enumerate(space)}
        from negtrain.metrics.probes import ProbeMetric  # torch: imported when scoring, not when listing

        return ProbeMetric([lookup.get(e.label, -2) for e in examples], [e.subset == NEGATED for e in examples],
                           groups=[e.group for e in examples])  # a probe's two sentences: one bootstrap unit

    def scorer(self, examples: Sequence[Example], predicted_labels: Sequence[str] | None = None) -> ProbeMetric:
        # Any token space is valid here: the vocabulary of whichever model made the predictions.
        return self.metric(examples, predicted_labels)

    def label_id(self, label: str, where: str) -> int:  # pragma: no cover - no closed label set
        raise DataError(f"{where}: {self.name} has no closed label set")
