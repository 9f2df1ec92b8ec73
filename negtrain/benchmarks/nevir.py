"""NevIR (Weller, Lawrie and Van Durme, "NevIR: Negation in Neural Information Retrieval", EACL
2024): pairs of documents that differ only by a negation, and one query for each; a ranker is right
on a pair only when it ranks each query's own document first (paired accuracy).

Read from the Hub dataset ``orionweller/NevIR`` (MIT), splits ``train``, ``validation`` and
``test``, stored as ``orionweller/NevIR/<split>.jsonl`` in the dataset's schema; the fields read are
the authors' (``src/negations/evaluate.py``): ``q1``, ``q2``, ``doc1``, ``doc2`` (``doc1`` is
``q1``'s document, ``doc2`` ``q2``'s) and ``id`` where a row has one (else its row number).

One query is one :class:`Example`, ``inputs = (query, own document, other document)``, id
``nevir/<split>/<id>/q1`` (and ``/q2``), ``group`` = the pair. Ranking is a two-way choice: the
query is scored after each document, the other document first, so that a tie ranks the other
document first, as the authors' strict ``should_be_higher > should_be_lower`` counts a tie wrong.

Scoring: a causal LM's log-likelihood of the query given the document (a query-likelihood ranker,
the prompt of UPR, Sachan et al. 2022: :data:`PROMPT`, negtrain's wording; the query follows it
after a space). Metrics (:class:`negtrain.metrics.nevir.NevirMetric`): ``paired_accuracy`` (the
paper's), ``query_accuracy`` (each query alone), ``pairs`` and ``n``; the pair is the bootstrap's
unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example, choice_syntax
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.files import HubSplit
from negtrain.metrics.declared import count, score

DATASET = "orionweller/NevIR"
PROMPT = "Passage: {document}\nPlease write a question based on this passage.\nQuestion:"


class Nevir(Benchmark):
    name = "nevir"
    splits = ("train", "validation", "test")
    labels = ("0", "1")  # the document ranked first: 0 the other one, 1 the query's own
    answer_type = AnswerKind.CHOICE
    input_names = ("query", "document", "other_document")
    target_delimiter = " "
    how_scored = {
        "causal_lm": "the query's summed log-likelihood after each document (a query-likelihood ranker); "
                     "a pair is right when both queries rank their own document first",
    }
    refuses = {
        "seq2seq": "NevIR ranks documents by a causal LM's query likelihood here; an encoder-decoder ranker is not implemented",
        "nli": "ranking two documents for a query, not premise/hypothesis pairs",
    }
    reported_metrics = (
        score("paired_accuracy"),
        score("query_accuracy"),
        count("pairs"),
        count("n"),
    )
    prediction_help = "the document ranked first: 1 (the query's own) or 0 (the other), or that document's text"
    citation = (
        "Weller, Orion; Lawrie, Dawn; Van Durme, Benjamin (2024). NevIR: Negation in Neural Information Retrieval. "
        "EACL 2024."
    )

    def files(self, split: str) -> list[HubSplit]:
        return [HubSplit(DATASET, split)]

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            pair = row.fields.get("id", row.index)
            if not isinstance(pair, (int, str)) or isinstance(pair, bool) or str(pair).strip() == "":
                raise row.error("id", f"expected a number or a name, got {pair!r}")
            q1, q2, doc1, doc2 = (row.text(k) for k in ("q1", "q2", "doc1", "doc2"))
            if doc1 == doc2:
                raise row.error("doc2", "the same text as doc1: nothing to rank")
            for name, query, own, other in (("q1", q1, doc1, doc2), ("q2", q2, doc2, doc1)):
                examples.append(
                    Example(
                        id=f"{self.name}/{split}/{pair}/{name}",
                        inputs=(query, own, other),
                        label="1",
                        subset=name,
                        group=f"{self.name}/{split}/{pair}",
                        meta={"line": row.line, "file": str(row.path)},
                    )
                )
        return examples

    def context(self, example: Example) -> str:
        return PROMPT.format(document=example.inputs[1])

    def choice_contexts(self, example: Example) -> tuple[str, str]:
        """The query after the other document (choice 0), then after its own (choice 1)."""
        return PROMPT.format(document=example.inputs[2]), PROMPT.format(document=example.inputs[1])

    def choices(self, example: Example) -> tuple[str, str]:
        return example.inputs[0], example.inputs[0]

    def choice_label(self, value: str, example: Example) -> str | None:
        stripped = value.strip()
        if stripped in self.labels:
            return stripped
        return {example.inputs[2].strip(): "0", example.inputs[1].strip(): "1"}.get(stripped)

    def metric(self, examples: Sequence[Example]):
        from negtrain.metrics.nevir import NevirMetric  # torch: imported when scoring, not when listing

        return NevirMetric([int(e.label) for e in examples], [str(e.group) for e in examples],
                           [[len(c) for c in self.choices(e)] for e in examples])

    def normalize_prediction(self, value: Any) -> str | None:
        return choice_syntax(value)
