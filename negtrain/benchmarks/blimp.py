"""BLiMP's NPI licensing (Warstadt et al. 2020, "BLiMP: The Benchmark of Linguistic Minimal Pairs
for English", TACL 8), read from the authors' files ``alexwarstadt/blimp`` ``data/<UID>.jsonl``.

The phenomenon ``npi_licensing`` is seven files of 1,000 minimal pairs each (:data:`FILES`). Each
line holds ``sentence_good``, ``sentence_bad``, the phenomenon (``field``, ``linguistics_term``,
``UID`` = the file's name) and ``pairID`` (0-999). One pair is one :class:`Example`:
``inputs = (sentence_good, sentence_bad)``, ``subset`` = the file's UID, id
``blimp-npi/<UID>/<pairID>`` (the same in every split that holds the pair, as MNLI's ids).

Splits: ``all`` (the 7,000 pairs; what ``data.eval: all`` and a report card score) and one split
per file, named by its UID, so ``blimp-npi/npi_present_1`` is that file alone.

Scoring is the paper's "simple LM method", exactly as lm-evaluation-harness's ``blimp_<UID>``
tasks run it (``output_type: multiple_choice``, ``doc_to_text: ""``, ``doc_to_choice:
[sentence_good, sentence_bad]``, ``doc_to_target: 0``, default ``target_delimiter`` " "): each
sentence is a continuation, " " + sentence, of an empty context, and the model is right when the
good sentence's summed log-probability is higher (a tie counts for the good one, numpy's argmax).
An empty context is the model's BOS token, or its EOS token where it has no BOS, as lm-eval gives
it (:mod:`negtrain.engine.empty_context`), so the first word is scored too.

Metrics (:class:`negtrain.metrics.blimp.BlimpMetric`): ``accuracy/<UID>`` per file (lm-eval's
``acc`` of ``blimp_<UID>``, with its ``acc_stderr``), ``accuracy``, the phenomenon's score as the
paper reports it, the unweighted mean of the per-file accuracies (the 7,000 pairs pooled give the
same number, each file having 1,000), and ``n``. The pair is the bootstrap's unit.

Families: ``causal_lm``. A seq2seq model scores a decoder output given an input, not a sentence's
probability, and the masked-LM pseudo-log-likelihood (Salazar et al. 2020) is not implemented:
both are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example, choice_named, choice_syntax
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.declared import count, score

REPO = "alexwarstadt/blimp"
#: The seven files of the phenomenon npi_licensing, in alphabetical order (as upstream lists them).
FILES = (
    "matrix_question_npi_licensor_present",
    "npi_present_1",
    "npi_present_2",
    "only_npi_licensor_present",
    "only_npi_scope",
    "sentential_negation_npi_licensor_present",
    "sentential_negation_npi_scope",
)
PHENOMENON = "npi_licensing"


class BlimpNpi(Benchmark):
    name = "blimp-npi"
    splits = ("all", *FILES)
    eval_splits = ("all",)
    labels = ("0", "1")  # the index of the sentence judged better: 0 = sentence_good
    answer_type = AnswerKind.CHOICE
    input_names = ("sentence_good", "sentence_bad")
    #: lm-eval's default target_delimiter: each sentence is scored as " " + sentence.
    target_delimiter = " "
    how_scored = {
        "causal_lm": "each sentence's summed log-likelihood after the model's BOS (else EOS) token, as lm-eval's "
                     "blimp_<file>; right when the good sentence's is higher",
    }
    refuses = {
        "seq2seq": "BLiMP compares the probabilities a language model gives two whole sentences; an encoder-decoder "
                   "scores a decoder output given an input, which is not that measure",
        "mlm": "a masked LM would need the pseudo-log-likelihood (Salazar et al. 2020), which negtrain does not "
               "implement; score a causal LM",
        "nli": "minimal pairs scored by sentence probabilities, not premise/hypothesis pairs",
    }
    split_descriptions = {
        "all": "the seven NPI-licensing files, 7,000 minimal pairs",
        **{f: f"the file {f}.jsonl, 1,000 minimal pairs" for f in FILES},
    }
    reported_metrics = (
        score("accuracy"),
        score("accuracy/<file>"),
        count("n"),
    )
    prediction_help = (
        "0 (the good sentence is more probable) or 1 (the bad one), or the text of one of the pair's sentences; "
        "\"loglikelihoods\" (good, bad), as a run writes them, may be given instead"
    )
    citation = (
        "Warstadt, Alex; Parrish, Alicia; Liu, Haokun; Mohananey, Anhad; Peng, Wei; Wang, Sheng-Fu; Bowman, "
        "Samuel R. (2020). BLiMP: The Benchmark of Linguistic Minimal Pairs for English. Transactions of the "
        "Association for Computational Linguistics 8, 377-392."
    )

    def files(self, split: str) -> list[RemoteFile]:
        self.check_split(split)
        names = FILES if split == "all" else (split,)
        return [RemoteFile(REPO, f"data/{name}.jsonl") for name in names]

    def read(self, split: str) -> list[Example]:
        examples = []
        for file in self.files(split):
            uid = file.path.removeprefix("data/").removesuffix(".jsonl")
            for row in read_jsonl(local(file)):
                good, bad = row.text("sentence_good"), row.text("sentence_bad")
                if good == bad:
                    raise row.error("sentence_bad", "the same text as sentence_good: not a minimal pair")
                if row.fields.get("UID") != uid:
                    raise row.error("UID", f"expected {uid!r} (the file's name), got {row.fields.get('UID')!r}")
                if row.fields.get("linguistics_term") != PHENOMENON:
                    raise row.error("linguistics_term", f"expected {PHENOMENON!r}, got {row.fields.get('linguistics_term')!r}")
                pair = row.get("pairID")
                if not (isinstance(pair, str) and pair.isdigit()) and not (isinstance(pair, int) and not isinstance(pair, bool)):
                    raise row.error("pairID", f"expected a number, got {pair!r}")
                examples.append(
                    Example(
                        id=f"{self.name}/{uid}/{int(pair)}",
                        inputs=(good, bad),
                        label="0",
                        subset=uid,
                        meta={"line": row.line, "file": str(row.path)},
                    )
                )
        return examples

    # -- what the causal-LM family scores ------------------------------------------------------

    def context(self, example: Example) -> str:
        return ""  # lm-eval's doc_to_text: the engine gives the model's BOS/EOS token for it

    def choices(self, example: Example) -> tuple[str, ...]:
        return example.inputs

    def choice_label(self, value: str, example: Example) -> str | None:
        return choice_named(value, self.labels, example.inputs)

    # -- metric and predictions files ------------------------------------------------------------

    def metric(self, examples: Sequence[Example]):
        from negtrain.metrics.blimp import BlimpMetric  # torch: imported when scoring, not when listing

        return BlimpMetric([int(e.label) for e in examples], [(str(e.subset),) for e in examples],
                           [[len(c) for c in e.inputs] for e in examples])

    def normalize_prediction(self, value: Any) -> str | None:
        return choice_syntax(value)
