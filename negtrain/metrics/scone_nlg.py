"""The metrics of :mod:`negtrain.benchmarks.scone_nlg`: the paper's, from people's judgements of
completions, and the automatic ``outcome_choice`` proxy."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.grouped import GroupedAccuracy
from negtrain.metrics.multiple_choice import first_argmax
from negtrain.metrics.uncertainty import Mean, UnitTable, ratios, unit_table


def fleiss_kappa_two_raters(judged, agreed, coherent_votes):
    """Fleiss' kappa of two raters and two categories, from totals over the items both judged
    (scalars, or arrays over bootstrap resamples).

    Fleiss (1971) with n = 2 raters per item: an item's agreement P_i = (sum_j n_ij^2 - n) / (n(n-1))
    is 1 when the two agree and 0 when they do not, so P-bar = agreed / judged. The category shares
    are p = coherent_votes / (2 judged) and 1 - p, P_e = p^2 + (1 - p)^2, and
    kappa = (P-bar - P_e) / (1 - P_e): NaN with nothing judged, or when every vote is the same
    category (P_e = 1)."""
    judged = np.asarray(judged, dtype=np.float64)
    p_bar = ratios(agreed, judged)
    p = ratios(coherent_votes, 2.0 * judged)
    p_e = p * p + (1.0 - p) * (1.0 - p)
    return ratios(p_bar - p_e, 1.0 - p_e)


class JudgedCompletions(GroupedAccuracy):
    """ScoNe-NLG's metric (She et al. 2023, section 4 and Table 5) on people's judgements.

    Each example's prediction is the judgement of its completion: with one annotator 1 (coherent
    and compatible with the narrative) or 0; with two, ``2 * first + second``. An item is *counted*
    when it was judged, and with two annotators only when they agree (the paper: "we evaluate
    InstructGPT only for the cases where the annotators agree"); the counted judgement is then the
    shared one.

    - ``accuracy``: coherent / counted; ``accuracy/<condition>`` the same within no_negation,
      one_scoped, one_not_scoped (Table 5's columns; its "Overall" is ``accuracy``).
    - ``consistency``: the paper reports none for ScoNe-NLG; this is ScoNe-NLI's consistency carried
      to the triplets: over the triplets all three of whose items are counted, the fraction whose
      three completions are all coherent. A triplet with an unjudged or disagreed item is left out,
      not counted wrong (the agreed-only rule, applied to whole triplets); ``groups_scored`` says how
      many triplets were scored.
    - two annotators only: ``judged`` (items both judged), ``agreed`` (of those, the items they
      agree on: the paper's 216/222) and ``fleiss_kappa`` over the judged items (see
      :func:`fleiss_kappa_two_raters`).
    - ``n``: items counted.

    The bootstrap resamples triplets.
    """

    resampling_unit = "triplet"

    def __init__(self, subsets: Sequence[str | None], groups: Sequence[str | None], subset_order: Sequence[str], annotators: int, **kwargs) -> None:
        # Every item's "gold" is coherent (1): a counted item is right when judged coherent.
        super().__init__(np.ones(len(subsets), dtype=np.int64), subsets, groups, group_size=3, subset_order=subset_order, **kwargs)
        if annotators not in (1, 2):
            raise ValueError(f"one or two annotators, not {annotators}")
        self.annotators = annotators

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        judged = predictions != MISSING
        if self.annotators == 1:
            return super().unit_table(predictions)
        first, second = (predictions >> 1) & 1, predictions & 1
        agree = judged & (first == second)
        counted = np.where(agree, first, MISSING)
        table = super().unit_table(counted)
        codes, n_units, _ = self._units()
        extra = unit_table(table.unit, codes, n_units, {
            "judged": judged, "agreed": agree, "coherent_votes": np.where(judged, first + second, 0),
        })
        return dataclasses.replace(table, columns=table.columns + extra.columns, values=np.hstack([table.values, extra.values]))

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out = super().from_totals(t)
        if self.annotators == 2:
            out["fleiss_kappa"] = fleiss_kappa_two_raters(t["judged"], t["agreed"], t["coherent_votes"])
            out["judged"] = t["judged"]
            out["agreed"] = t["agreed"]
        return out


class OutcomeChoice(GroupedAccuracy):
    """ScoNe-NLG's automatic proxy, *not* the paper's metric: per narrative, which of its frame's two
    endings a language model prefers by log-likelihood, against the gold ending.

    - ``outcome_choice_accuracy``: right choices / choices; ``outcome_choice_accuracy/<condition>``.
    - ``outcome_choice_consistency``: over triplets all three of whose items were scored, the
      fraction with all three choices right; ``groups_scored`` counts them. ``n``: items scored.

    ``update`` takes the chosen index per item, or a model run's (B, 2) float rows of each
    ending's summed log-likelihood as the multiple-choice scorer returns them (the higher wins,
    the first on a tie), or integer rows of (acc choice, acc_norm choice) of which the first is
    used. The bootstrap resamples triplets.
    """

    resampling_unit = "triplet"

    def __init__(self, gold: Sequence[int], subsets: Sequence[str | None], groups: Sequence[str | None], subset_order: Sequence[str], **kwargs) -> None:
        super().__init__(gold, subsets, groups, group_size=3, subset_order=subset_order, **kwargs)

    def update(self, indices: torch.Tensor, predictions: torch.Tensor) -> None:
        if predictions.is_floating_point():  # every ending's log-likelihood: the acc choice
            predictions = first_argmax(predictions.to(torch.float64))
        super().update(indices, predictions[:, 0] if predictions.ndim == 2 else predictions)

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        renamed = {}
        for key, value in super().from_totals(t).items():
            if key.startswith(("accuracy", "consistency")):
                key = f"outcome_choice_{key}"
            renamed[key] = value
        return renamed


class CompletionsWritten(ExampleMetric):
    """A protocol's ScoNe-NLG completions, before anyone has judged them: ``n``, how many were
    written (1 per completion; the paper's metric needs people's judgements, see
    :class:`JudgedCompletions`); a count, so no interval."""

    resampling_unit = "example"

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        written = predictions != MISSING
        return unit_table(self.resampling_unit, np.arange(len(predictions)), len(predictions), {"written": written})

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        return {"n": t["written"]}
