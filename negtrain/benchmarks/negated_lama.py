"""Negated LAMA and misprimed probes (Kassner & Schütze 2020, "Negated and Misprimed Probes for
Pretrained Language Models: Birds Can Talk, But Cannot Fly", ACL 2020), read from the authors'
files ``norakassner/LAMA_primed_negated`` ``data/<source>/<variant>/*.jsonl``.

Sources: ConceptNet, GoogleRE, SQUAD, TREx. Variants: ``random``, ``high_ranked``,
``low_ranked``: how the prime of ``masked_misprimed`` was chosen; the affirmative and negated
clozes are the same in all three. ``negated_lama`` reads ``random`` (11,165 probes);
``negated_lama-high_ranked`` (11,165) and ``negated_lama-low_ranked`` (11,100: no SQUAD folder,
fewer GoogleRE rows upstream) read the others.

One probe is one :class:`Example`: ``inputs = (affirmative, negated, misprimed)`` (each with one
``[MASK]``), ``label = obj_label``, ``subset`` = the source, ``group`` = ``<source>/<relation>``.
Ids are ``negated_lama/<split>/<source>/<relation>/<row>``, the 0-based row of the probe in its
file. The relation is the file's relation (TREx ``P17``, GoogleRE ``place_of_birth``), the
``pred`` field (ConceptNet) or ``squad``.

Splits (this project's; the paper has none, it only probes):

- ``all``: every probe.
- ``train`` / ``test``: a deterministic 80/20 split by **subject and relation**. The key of a
  probe is (lower-cased subject, canonical relation), where GoogleRE's relations map onto the
  Wikidata properties TREx uses (place_of_birth = P19, place_of_death = P20, date_of_birth =
  P569) and a SQUAD probe's subject is its SQuAD question id (every SQUAD row has the
  ``sub_label`` "Squad"). A probe is in ``test`` when the first 8 hex digits of
  sha256(key) modulo 100 are below 20. So every probe about one subject and relation is on one
  side, whichever source or file it comes from: no test fact (subject, relation, object) and no
  test cloze appears in training. The same subject can appear on both sides with different
  relations, and relations are on both sides: the split tests new facts, not new relations.

Scoring and metrics: :class:`negtrain.metrics.cloze.NegatedLamaMetric`, over LAMA's common
vocabulary as Kassner & Schütze's code scores it (:func:`common_vocabulary`: a probe whose object is
not in it, or is not one token of the scored model, is skipped, ``n_skipped``). Families: ``mlm``
(the blank is the mask token) and ``causal_lm`` (blanks that end the sentence only, see
:mod:`negtrain.models.lm`). ``negtrain evaluate --predictions`` re-scores a run's own prediction
lines, which carry the model's top-1s, rank correlation and ranks per probe.

The common vocabulary: LAMA (Petroni et al. 2019) distributes ``common_vocab_cased.txt`` (21,018
words: the vocabulary the models it compares share) from its own server; the identical file is in
``ncarraz/OptiPrompt`` as ``common_vocabs/common_vocab_cased.txt.original`` (OptiPrompt's
``common_vocab_cased.txt`` is a different, smaller file), and it is read from there like every
other benchmark file.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import ClassVar, cast

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.negated_probes import MASK
from negtrain.benchmarks.files import RemoteFile
from negtrain.core.errors import DataError
from negtrain.metrics.declared import count, score

#: The negated-LAMA scores where lower is better (NegatedLamaMetric reports them; the declaration
#: lives here so that listing benchmarks does not import torch).
LOWER_IS_BETTER = ("negated_top1_error", "rank_correlation", "top1_overlap", "mispriming_rate", "misprime_top1_rate")

REPO = "norakassner/LAMA_primed_negated"
SOURCES = ("ConceptNet", "GoogleRE", "SQUAD", "TREx")
#: The files of each source, as upstream names them ({variant} and {suffix} filled in).
TREX_RELATIONS = (
    "P1001", "P101", "P103", "P106", "P108", "P127", "P1303", "P131", "P136", "P1376", "P138", "P140",
    "P1412", "P159", "P17", "P176", "P178", "P19", "P190", "P20", "P264", "P276", "P279", "P30", "P31",
    "P36", "P361", "P364", "P37", "P39", "P407", "P413", "P449", "P463", "P47", "P495", "P527", "P530",
    "P740", "P937",
)
GOOGLE_RE = {"place_of_birth": "P19", "place_of_death": "P20", "date_of_birth": "P569"}
TEST_PERCENT = 20
#: LAMA's common vocabulary (see the module docstring).
COMMON_VOCAB = RemoteFile("ncarraz/OptiPrompt", "common_vocabs/common_vocab_cased.txt.original", revision="main")


def common_vocabulary() -> list[str]:
    """LAMA's common vocabulary, one word a line, in the file's order (duplicates dropped)."""
    path = local(COMMON_VOCAB)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    words = list(dict.fromkeys(w.strip() for w in text.splitlines() if w.strip()))
    if not words:
        raise DataError(f"{path}: the common vocabulary is empty")
    return words


def relation_file(source: str, relation: str) -> str:
    """The relation file a probe comes from, as K&S average per file: one per TREx and GoogleRE
    relation, ``ConceptNet`` and ``SQUAD/squad`` one file each."""
    return f"{source}/{relation}" if relation else source


INPUTS = ("affirmative", "negated", "misprimed")


def lama_files(variant: str) -> list[tuple[str, str, str]]:
    """(source, relation or '', path in the repository) of every file of a variant."""
    out = [("ConceptNet", "", f"data/ConceptNet/{variant}/ConceptNet.jsonl")]
    out += [("GoogleRE", rel, f"data/GoogleRE/{variant}/{rel}.jsonl") for rel in GOOGLE_RE]
    if variant != "low_ranked":  # upstream has no SQUAD/low_ranked folder
        out.append(("SQUAD", "squad", f"data/SQUAD/{variant}/Squad.jsonl"))
    suffix = "_random" if variant == "random" else ""
    out += [("TREx", rel, f"data/TREx/{variant}/{rel}{suffix}.jsonl") for rel in TREX_RELATIONS]
    return out


def split_key(source: str, relation: str, subject: str) -> str:
    canonical = GOOGLE_RE.get(relation, relation) if source in ("GoogleRE", "TREx") else f"{source}:{relation}"
    return f"{subject.strip().lower()}\t{canonical}"


def in_test(key: str) -> bool:
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 100 < TEST_PERCENT


def prime_word(misprimed: str) -> str:
    """The misprime: the word before the '?' that starts the misprimed cloze ("Talk? Birds can [MASK].")."""
    match = re.match(r"\s*([^?]+)\?", misprimed)
    return match.group(1).strip() if match else ""


def _one_sentence(row, name: str) -> str:
    value = row.get(name)
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) != 1 or not isinstance(items[0], str) or not items[0].strip():
        raise row.error(name, f"expected one sentence (a string or a list of one), got {value!r}")
    if items[0].count(MASK) != 1:
        raise row.error(name, f"expected exactly one {MASK} in {items[0]!r}")
    return items[0]


class NegatedLama(Benchmark):
    name = "negated_lama"
    variant: ClassVar[str] = "random"
    splits = ("train", "test", "all")
    contains = {"all": ("train", "test")}
    labels = ()  # open vocabulary: the label is the object string
    open_vocabulary = True
    answer_type = AnswerKind.CLOZE
    how_scored = {
        "mlm": "top-1 token at the [MASK] of the affirmative, negated and misprimed cloze",
        "causal_lm": "next token after the text before the blank, for probes whose blank ends the sentence (the rest: n_skipped)",
    }
    refuses = {
        "nli": "cloze probes with open-vocabulary answers, not premise/hypothesis pairs",
        "seq2seq": "a blank mid-sentence needs a masked LM, and T5's sentinel infilling is not the probe's definition",
    }
    input_names = INPUTS
    reported_metrics = (
        score("affirmative_top1_accuracy"),
        score("affirmative_top1_accuracy/<source>"),
        score("affirmative_top1_accuracy_macro"),
        score("affirmative_top1_accuracy_macro/<source>"),
        *(d for name in LOWER_IS_BETTER for d in (score(name, lower_is_better=True), score(f"{name}/<source>", lower_is_better=True))),
        count("n_probes"),
        count("n_skipped"),
        count("common_vocab_left_out"),
    )
    prediction_help = "a line a negtrain run wrote (top-1s, rank correlation and ranks per probe)"
    citation = (
        "Kassner, Schütze (2020). Negated and Misprimed Probes for Pretrained Language Models: Birds Can "
        "Talk, But Cannot Fly. ACL 2020. Petroni et al. (2019). Language Models as Knowledge Bases? "
        "EMNLP 2019. Hosseini et al. (2021). Understanding by Understanding Not. NAACL 2021."
    )

    def files(self, split: str) -> list[RemoteFile]:
        # The common vocabulary last: read() pairs the probe files with lama_files() in order.
        return [*(RemoteFile(REPO, path, revision="master") for _, _, path in lama_files(self.variant)), COMMON_VOCAB]

    def read(self, split: str) -> list[Example]:
        examples = []
        for (source, relation, _), file in zip(lama_files(self.variant), self.files(split), strict=False):
            for row in read_jsonl(local(file)):
                rel = relation or row.text("pred")
                subject = row.text("sub_label") if source != "SQUAD" else str(row.get("id")).split("_")[0]
                key = split_key(source, rel, subject)
                if split != "all" and in_test(key) != (split == "test"):
                    continue
                texts = tuple(_one_sentence(row, f) for f in ("masked_sentences", "masked_negations", "masked_misprimed"))
                obj = row.text("obj_label").strip()
                examples.append(
                    Example(
                        id=f"{self.name}/{split}/{source}/{rel}/{row.index}",
                        inputs=texts,
                        label=obj,
                        subset=source,
                        group=f"{source}/{rel}",
                        meta={"file": str(row.path), "line": row.line, "key": key, "prime": prime_word(texts[2]),
                              "relation_file": relation_file(source, relation)},
                    )
                )
        return examples

    def metric(self, examples: Sequence[Example], predicted_labels: Sequence[str] | None = None):
        from negtrain.metrics.cloze import SKIPPED, NegatedLamaMetric  # torch: imported when scoring, not when listing

        # Without a model the gold objects have no token ids: what a run scores is built by the
        # family (see negtrain.models.mlm / lm); this one names the metrics.
        # Every probe names its source (subset) and relation (group): see read.
        return NegatedLamaMetric([SKIPPED] * len(examples), [[] for _ in examples], cast(list[str], [e.subset for e in examples]),
                                 cast(list[str], [e.group for e in examples]), files=[e.meta["relation_file"] for e in examples])

    def scorer(self, examples: Sequence[Example], predicted_labels: Sequence[str] | None = None):
        return self.metric(examples, predicted_labels)

    def normalize_prediction(self, value) -> str | None:
        return None


class NegatedLamaHighRanked(NegatedLama):
    name = "negated_lama-high_ranked"
    variant = "high_ranked"


class NegatedLamaLowRanked(NegatedLama):
    name = "negated_lama-low_ranked"
    variant = "low_ranked"
