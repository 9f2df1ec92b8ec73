"""The metric of :mod:`negtrain.benchmarks.tinad`: accuracy and coherence as the authors' scorer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain.metrics.base import MISSING, UNPARSED, ExampleMetric, ratio
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table

ANTONYMY_PATTERNS = frozenset({2, 4})
#: The negation types the authors' scorer breaks accuracy down by, in the paper's order and as the
#: authors' files spell them (``non_verbal``: their data, few-shot rows and results files).
NEGATION_TYPES = ("verbal", "non_verbal", "analytic", "synthetic", "clausal", "subclausal")
#: The key of a pattern's accuracy (Figure 2's columns): ``accuracy/pattern/01`` .. ``accuracy/pattern/11``.
PATTERN_KEY = "pattern/{:02d}"
COHERENCE = ("coherence", "coherence/input", "coherence/distractor", "coherence/affirmation", "coherence/negation")
#: The count keys of the coherence scores (the authors' Coherent / Incoherent), in COHERENCE's order.
COHERENCE_COUNTS = ("all", "input", "distractor", "affirmation", "negation")
#: The authors' confusion counts of every accuracy, gold True read as positive.
CONFUSION = ("TP", "FP", "FN", "TN")


def reference_label(cell: str, pattern_id: int) -> bool:
    """The label a sentence of this cell has when it takes part in the coherence checks."""
    ref = {"input_affirmation": True, "input_negation": False, "distractor_affirmation": False, "distractor_negation": True}[cell]
    if pattern_id in ANTONYMY_PATTERNS and cell.startswith("input"):
        ref = not ref
    return ref


class TinadMetric(ExampleMetric):
    """TINAD's accuracy and coherence, as defined by the paper and its authors' scorer
    (``evaluate.py`` of hitz-zentroa/This-is-not-a-Dataset). Values are fractions, not percentages.

    Accuracy (right / predicted):

    - ``accuracy``; ``accuracy/affirmation`` and ``accuracy/negation`` (by ``negation_type``);
    - ``accuracy/<cell>`` for the cells ``input_affirmation``, ``input_negation``,
      ``distractor_affirmation``, ``distractor_negation`` (``isDistractor`` crossed with whether
      ``negation_type`` is "affirmation");
    - ``accuracy/<type>`` for every negation type found in ``negation_type``, ``semantic_type`` or
      ``syntactic_scope`` ("affirmation" and "none" are not types): verbal, non_verbal, analytic,
      synthetic, clausal, subclausal (the authors' ``Negation_analysis.<type>_all``), and
      ``accuracy/<type>_input``, ``accuracy/<type>_distractor`` (their ``<type>_input``,
      ``<type>_distractor``: the type's sentences without, with a distractor; NaN when there are
      none, where the authors print 0);
    - ``accuracy/pattern/<NN>`` for every pattern found in ``pattern_id`` (``accuracy/pattern/01``
      .. ``accuracy/pattern/11``): the accuracy of Figure 2 (§6). The paper says "we fine-tune
      Vicuna13B with each of the 11 patterns ... and we evaluate its performance on the other
      patterns. Figure 2 shows the overall accuracy scores": overall accuracy, i.e. every sentence
      of the pattern, affirmative and negated, with and without a distractor, each by its own
      ``pattern_id``. The paper does not name the split; its §6 evaluates on the test split (Table
      7 "the affirmative test sentences"), which is what ``negtrain test`` scores. A pattern absent
      from the data is not reported (its accuracy is undefined, not 0); one present but with no
      prediction is NaN. The protocol's Table 5 (``tinad_patterns``) counts with the same
      ``seen_right``, by pattern and cell.

    Coherence is computed per ``test_id`` group. Each cell has a reference label: for patterns other
    than 2 and 4, input-affirmation True, input-negation False, distractor-affirmation False,
    distractor-negation True; for the antonymy patterns 2 and 4 the two input references are
    swapped. Only sentences whose gold label equals their cell's reference label take part in the
    cell checks below (the others are skipped there, but still count in the all-right/all-wrong
    condition of ``coherence``). With A, N, DA, DN the predictions of the taking-part sentences of
    the four cells:

    - ``coherence/input``: all of A agree, all of N agree, and A differs from N.
    - ``coherence/distractor``: all of DA agree, all of DN agree, and DA differs from DN.
    - ``coherence``: both of the above hold, *and* the predictions on every sentence of the group
      (skipped ones included) are either all right or all wrong.
    - ``coherence/affirmation``: all of A agree, all of DA agree, and A differs from DA; for
      patterns 2 and 4, A must equal DA instead.
    - ``coherence/negation``: the same for N and DN.

    Each score is the fraction of scored groups that are coherent. A group is scored when all of
    its sentences were predicted and each of its four cells holds at least one taking-part
    sentence. The authors' scorer crashes on a group lacking a cell; here such a group is left
    out of every coherence score and counted in ``groups_lacking_cell``. ``groups_scored`` is the
    number of groups scored.

    Counts, as the authors' scorer reports them beside each accuracy and coherence score:

    - ``confusion/<part>/<TP|FP|FN|TN>`` for every accuracy above (``<part>``: ``all`` for
      ``accuracy``, else the accuracy's own name after ``accuracy/``), gold True read as
      positive. An unparsed response is wrong: FN when the gold label is True, FP when False.
    - ``coherent/<all|input|distractor|affirmation|negation>`` and ``incoherent/...``: the scored
      groups that are, and are not, coherent (their ``Coherent`` / ``Incoherent``), for
      ``coherence``, ``coherence/input``, ... in that order.

    The authors' per-pattern breakdown (their scorer run again on each pattern's sentences) is
    ``pattern/<NN>/<name>`` for every score and count above, a pattern's overall accuracy being
    Figure 2's ``accuracy/pattern/<NN>``: e.g. ``pattern/02/accuracy/input_negation``,
    ``pattern/02/coherence/distractor``, ``pattern/02/confusion/all/TP``,
    ``pattern/02/coherent/all``. A group counts for the pattern of its first sentence (as the
    authors' coherence). A part of a pattern with no sentence is not reported; a type's
    ``_input`` / ``_distractor`` is, wherever the type is (NaN when empty). The breakdown and the
    counts are computed from the predictions, not resampled: they carry no interval.

    A ``test_id`` group is one independent unit for the bootstrap.
    """

    resampling_unit = "test_id group"

    def __init__(
        self,
        gold: Sequence[bool],
        cells: Sequence[str],
        patterns: Sequence[int] | np.ndarray,
        groups: Sequence[str | None],
        types: Sequence[Sequence[str]],
        *,
        cell_names: Sequence[str],
        label_names: Sequence[str],
        **kwargs,
    ) -> None:
        super().__init__(num_examples=len(gold), **kwargs)
        # cell_names: input/distractor x affirmation/negation, in this order; label_names: prediction ids.
        self.cell_names = tuple(cell_names)
        self.true_id = tuple(label_names).index("True")
        self.gold = np.asarray(gold, dtype=bool)
        self.cells = np.array([self.cell_names.index(c) for c in cells], dtype=np.int64)
        patterns = np.asarray(patterns, dtype=np.int64)
        #: Each sentence's own pattern (Figure 2's per-pattern accuracy, the protocol's Table 5).
        self.patterns = patterns
        self.pattern_ids = sorted({int(p) for p in patterns.tolist()})
        order: dict[str | None, list[int]] = {}
        for i, g in enumerate(groups):
            order.setdefault(g, []).append(i)
        self.groups = [np.array(m, dtype=np.int64) for m in order.values()]
        self.unit_codes = np.empty(len(gold), dtype=np.int64)
        for u, m in enumerate(self.groups):
            self.unit_codes[m] = u
        # The authors' scorer takes a group's pattern from its first sentence, for all its sentences.
        group_pattern = np.empty(len(gold), dtype=np.int64)
        for m in self.groups:
            group_pattern[m] = patterns[m[0]]
        self.group_patterns = np.array([int(patterns[m[0]]) for m in self.groups], dtype=np.int64)
        self.group_antonymy = [int(p) in ANTONYMY_PATTERNS for p in self.group_patterns]
        refs = np.array([reference_label(c, int(p)) for c, p in zip(cells, group_pattern, strict=False)], dtype=bool)
        self.takes_part = refs == self.gold
        found = {t.strip().lower() for ts in types for t in ts} - {"affirmation", "none", ""}
        self.type_names = [t for t in NEGATION_TYPES if t in found] + sorted(found - set(NEGATION_TYPES))
        self.type_members = {t: np.array([t in {x.strip().lower() for x in ts} for ts in types], dtype=bool) for t in self.type_names}
        self.distractor = (self.cells == 2) | (self.cells == 3)
        self.parts = self._parts()

    def _parts(self) -> dict[str, np.ndarray]:
        """Every accuracy's sentences, by the accuracy's name after ``accuracy/`` ("": all), in the
        order the authors' scorer lists them."""
        affirmation = (self.cells == 0) | (self.cells == 2)
        parts = {"": np.ones(len(self.gold), dtype=bool), "affirmation": affirmation, "negation": ~affirmation}
        parts.update({name: self.cells == c for c, name in enumerate(self.cell_names)})
        for t in self.type_names:
            members = self.type_members[t]
            parts.update({t: members, f"{t}_input": members & ~self.distractor, f"{t}_distractor": members & self.distractor})
        return parts

    def seen_right(self, predictions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per sentence, whether it was predicted and whether it was predicted right: the one
        definition of a right answer for every TINAD accuracy (this metric's, the protocol's
        Table 5)."""
        seen = predictions != MISSING
        # An unparsed response is neither True nor False: wrong whatever the gold label.
        right = seen & (predictions != UNPARSED) & ((predictions == self.true_id) == self.gold)
        return seen, right

    def group_outcomes(self, predictions: np.ndarray) -> dict[str, np.ndarray]:
        """Per ``test_id`` group: whether it was scored, lacked a cell, and is coherent by each of
        COHERENCE (see the class)."""
        seen, right = self.seen_right(predictions)
        pred_true = predictions == self.true_id
        n_groups = len(self.groups)
        per_unit = {k: np.zeros(n_groups, dtype=bool) for k in ("groups_scored", "groups_lacking_cell", *COHERENCE)}
        for g, (members, antonymy) in enumerate(zip(self.groups, self.group_antonymy, strict=False)):
            if not seen[members].all():
                continue
            part = members[self.takes_part[members]]
            cell_preds = [set(pred_true[part[self.cells[part] == c]].tolist()) for c in range(4)]
            if any(not p for p in cell_preds):
                per_unit["groups_lacking_cell"][g] = True
                continue
            per_unit["groups_scored"][g] = True
            a, n, da, dn = cell_preds
            agree = [len(p) == 1 for p in cell_preds]
            inp = agree[0] and agree[1] and a != n
            dis = agree[2] and agree[3] and da != dn
            same_or_differ = (lambda x, y: x == y) if antonymy else (lambda x, y: x != y)
            all_right_or_wrong = right[members].all() or not right[members].any()
            per_unit["coherence/input"][g] = inp
            per_unit["coherence/distractor"][g] = dis
            per_unit["coherence"][g] = inp and dis and all_right_or_wrong
            per_unit["coherence/affirmation"][g] = agree[0] and agree[2] and same_or_differ(a, da)
            per_unit["coherence/negation"][g] = agree[1] and agree[3] and same_or_differ(n, dn)
        return per_unit

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        seen, right = self.seen_right(predictions)
        columns = {"seen": seen, "right": right}
        for name, members in self.parts.items():
            if name:
                columns[f"seen/{name}"] = seen & members
                columns[f"right/{name}"] = right & members
        for p in self.pattern_ids:
            columns[f"seen/{PATTERN_KEY.format(p)}"] = seen & (self.patterns == p)
            columns[f"right/{PATTERN_KEY.format(p)}"] = right & (self.patterns == p)
        return unit_table(self.resampling_unit, self.unit_codes, len(self.groups), columns, self.group_outcomes(predictions))

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out: dict[str, np.ndarray | Mean] = {"accuracy": Mean(t["right"], t["seen"])}
        patterns = [PATTERN_KEY.format(p) for p in self.pattern_ids]
        for name in (*(p for p in self.parts if p), *patterns):
            out[f"accuracy/{name}"] = Mean(t[f"right/{name}"], t[f"seen/{name}"])
        for k in COHERENCE:
            out[k] = Mean(t[k], t["groups_scored"])
        out["groups_scored"] = t["groups_scored"]
        out["groups_lacking_cell"] = t["groups_lacking_cell"]
        out["n"] = t["seen"]
        return out

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        """The resampled metrics (``from_totals``), then the authors' counts and per-pattern
        breakdown (see the class), which carry no interval."""
        out = super().score(predictions)
        seen, right = self.seen_right(predictions)
        groups = self.group_outcomes(predictions)
        out.update(self._authors_numbers(seen, right, groups, np.ones(len(self.gold), dtype=bool), np.ones(len(self.groups), dtype=bool),
                                         accuracies=False))
        for p in self.pattern_ids:
            in_pattern = self.patterns == p
            numbers = self._authors_numbers(seen, right, groups, in_pattern, self.group_patterns == p, accuracies=True)
            out.update({f"{PATTERN_KEY.format(p)}/{k}": v for k, v in numbers.items()})
        return out

    def _authors_numbers(self, seen: np.ndarray, right: np.ndarray, groups: Mapping[str, np.ndarray], rows: np.ndarray,
                         in_groups: np.ndarray, *, accuracies: bool) -> dict[str, float]:
        """The authors' ``Scorer`` and ``Coherence_Scorer`` on the sentences ``rows`` and the groups
        ``in_groups``: confusion and coherent counts, and (``accuracies``) every accuracy but the
        overall one and every coherence score. In a pattern (``accuracies``) a part with no
        sentence among ``rows`` is left out (a type's _input/_distractor stays wherever the type
        is); the whole split counts every part it reports an accuracy for."""
        out: dict[str, float] = {}
        counts: dict[str, float] = {}
        for name, members in self.parts.items():
            base = name.rsplit("_", 1)[0] if name.endswith(("_input", "_distractor")) and name.rsplit("_", 1)[0] in self.type_members else name
            if accuracies and not (self.parts[base] & rows).any():
                continue
            sel, r = seen & members & rows, right & members & rows
            tp, tn = int((r & self.gold).sum()), int((r & ~self.gold).sum())
            fn, fp = int((sel & ~r & self.gold).sum()), int((sel & ~r & ~self.gold).sum())
            if accuracies and name:
                out[f"accuracy/{name}"] = ratio(tp + tn, tp + tn + fn + fp)
            counts.update({f"confusion/{name or 'all'}/{c}": float(v) for c, v in zip(CONFUSION, (tp, fp, fn, tn), strict=True)})
        scored = groups["groups_scored"] & in_groups
        for key, which in zip(COHERENCE, COHERENCE_COUNTS, strict=True):
            coherent = int((groups[key] & scored).sum())
            if accuracies:
                out[key] = ratio(coherent, int(scored.sum()))
            counts[f"coherent/{which}"] = float(coherent)
            counts[f"incoherent/{which}"] = float(int(scored.sum()) - coherent)
        return {**out, **counts}
