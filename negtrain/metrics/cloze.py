"""Metrics of negated and misprimed cloze probes (negated LAMA), per source and overall.

Each probe is scored from four numbers the model family computes (see
:class:`negtrain.models.mlm.LamaEvaluator` and the causal evaluator in :mod:`negtrain.models.lm`):
the top-1 token at the blank of the affirmative, the negated and the misprimed cloze (ids in a
token space), and the Spearman rank correlation between the model's scores over the whole
vocabulary at the affirmative and at the negated blank. A probe a family cannot score (a causal
LM where the blank does not end the sentence) is reported as skipped (``n_skipped``), never as wrong.

Definitions (per probe, then averaged over the probes of a source, and over all probes):

- ``affirmative_top1_accuracy``: LAMA's P@1 (Petroni et al. 2019, "Language Models as Knowledge
  Bases?", §3 and Table 2): 1 if the top-1 prediction for the affirmative cloze is the gold
  object. Table 2 of LAMA averages P@1 over the relations of a corpus; that figure is
  ``affirmative_top1_accuracy_macro`` (mean over relations of the per-relation P@1); the plain
  name is the mean over probes.
- ``negated_top1_error``: Hosseini et al. 2021 ("Understanding by Understanding Not", the
  negated-LAMA table, Table 3 as we recall it): 1 if the top-1 prediction for the *negated* cloze is the affirmative's gold
  object. Lower is better.
- ``rank_correlation``: Kassner & Schütze 2020 (Table 1, column ρ): Spearman's rank correlation
  between the model's scores over the vocabulary for the affirmative and for the negated cloze,
  averaged over probes. K&S rank LAMA's common vocabulary (the intersection of the vocabularies
  of the models they compare); here the ranking is over the scored model's whole vocabulary.
  Lower means the negation changed the predictions more.
- ``top1_overlap``: Kassner & Schütze 2020 (Table 1, column %): 1 if the top-1 predictions for the
  affirmative and the negated cloze are the same token. Lower is better.
- ``mispriming_rate``: Kassner & Schütze 2020 (Table 3, "absolute precision drop"): over the
  probes whose affirmative cloze is answered correctly, the fraction whose misprimed cloze is
  not. Lower is better.
- ``misprime_top1_rate``: the fraction of probes whose misprimed cloze's top-1 prediction is the
  misprime itself (any casing; a prime the vocabulary has no single token for cannot win). Lower
  is better. K&S discuss this outcome ("Talk? Birds can [MASK]" -> "talk") but tabulate the
  precision drop above.

What could and could not be confirmed (no access to the papers' full text or the authors' scoring
code from here; the definitions follow the papers as we read them):

- confirmed from the papers' abstracts: Hosseini et al. report "the mean top 1 error rate" on
  negated LAMA (down to 4% for BERTNOT); Kassner & Schütze compare the predictions for the
  affirmative and the negated cloze and find the predicted fillers overlap highly.
- not confirmed: the table numbers cited above (Hosseini Table 3, K&S Tables 1 and 3, LAMA
  Table 2); whether K&S average ρ and % per probe over all probes of a source (as here) or per
  relation first; that K&S's ρ ranks their common vocabulary rather than the model's; and K&S's
  restriction of the mispriming analysis to correctly answered probes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchmetrics.utilities import dim_zero_cat

from negtrain.metrics.base import ExampleMetric, ratio

SKIPPED = -3  # the family cannot score this probe
NOT_IN_SPACE = -2  # the gold object (or prime) has no id in the prediction space

AFF, NEG, MIS, RHO = range(4)


class NegatedLamaMetric(ExampleMetric):

    def __init__(
        self,
        gold: Sequence[int],
        primes: Sequence[Sequence[int]],
        sources: Sequence[str],
        relations: Sequence[str],
        note: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(num_examples=len(gold), **kwargs)
        self.gold = np.asarray(gold, dtype=np.int64)
        width = max((len(p) for p in primes), default=1) or 1
        self.primes = np.full((len(gold), width), NOT_IN_SPACE, dtype=np.int64)
        for i, p in enumerate(primes):
            self.primes[i, : len(p)] = p
        self.sources = np.asarray(sources, dtype=object)
        self.relations = np.asarray(relations, dtype=object)
        self.note = note
        self.add_state("rows", default=[], dist_reduce_fx="cat")
        self.table: np.ndarray | None = None

    @classmethod
    def for_examples(cls, examples, space: Sequence[str]) -> NegatedLamaMetric:
        """The metric for predictions that are ids into ``space`` (token strings)."""
        lookup = {t: i for i, t in enumerate(space)}
        primes = [
            sorted({lookup[w] for w in {e.meta["prime"], e.meta["prime"].lower()} if w in lookup}) for e in examples
        ]
        return cls([lookup.get(e.label, NOT_IN_SPACE) for e in examples], primes,
                   [e.subset for e in examples], [e.group for e in examples])

    def update(self, indices: torch.Tensor, predictions: torch.Tensor) -> None:
        """``predictions``: (B, 4) float64 rows ``[top1 affirmative, top1 negated, top1 misprimed, rho]``."""
        self.indices.append(indices.detach().to(torch.long).flatten())
        self.rows.append(predictions.detach().to(torch.float64).reshape(-1, 4))

    def compute(self) -> dict[str, torch.Tensor]:
        table = np.full((self.num_examples, 4), np.nan)
        table[:, :3] = -1  # not evaluated
        if len(self.indices):
            idx = dim_zero_cat(self.indices).cpu().numpy()
            table[idx] = dim_zero_cat(self.rows).cpu().numpy()
        self.table = table
        self.last_predictions = None  # no single label per probe to write
        return {k: torch.tensor(float(v), dtype=torch.float64) for k, v in self.score(table).items()}

    def score(self, table: np.ndarray) -> dict[str, float]:
        if table.ndim == 1:  # a flat prediction array (e.g. for the metric names): nothing scored
            table = np.column_stack([np.full((len(table), 3), -1.0), np.full(len(table), np.nan)])
        top = table[:, :3].astype(np.int64)
        scored = top[:, AFF] >= 0
        out = self._block(top, table[:, RHO], scored)
        out["affirmative_top1_accuracy_macro"] = self._macro(top, scored, np.ones(len(top), dtype=bool))
        for source in sorted(set(self.sources)):
            member = self.sources == source
            for k, v in self._block(top, table[:, RHO], scored & member).items():
                out[f"{k}/{source}"] = v
            out[f"affirmative_top1_accuracy_macro/{source}"] = self._macro(top, scored, member)
        out["n_probes"] = float(scored.sum())
        out["n_skipped"] = float((top[:, AFF] == SKIPPED).sum())
        return out

    def _block(self, top: np.ndarray, rho: np.ndarray, where: np.ndarray) -> dict[str, float]:
        aff_right = top[:, AFF] == self.gold
        mis_right = top[:, MIS] == self.gold
        prime_won = (self.primes == top[:, MIS : MIS + 1]).any(axis=1)
        return {
            "affirmative_top1_accuracy": ratio((aff_right & where).sum(), where.sum()),
            "negated_top1_error": ratio(((top[:, NEG] == self.gold) & where).sum(), where.sum()),
            "rank_correlation": float(np.mean(rho[where])) if where.any() else float("nan"),
            "top1_overlap": ratio(((top[:, AFF] == top[:, NEG]) & where).sum(), where.sum()),
            "mispriming_rate": ratio((where & aff_right & ~mis_right).sum(), (where & aff_right).sum()),
            "misprime_top1_rate": ratio((where & prime_won).sum(), where.sum()),
        }

    def _macro(self, top: np.ndarray, scored: np.ndarray, member: np.ndarray) -> float:
        right = top[:, AFF] == self.gold
        per_relation = [right[scored & member & (self.relations == r)].mean()
                        for r in sorted(set(self.relations[member])) if (scored & member & (self.relations == r)).any()]
        return float(np.mean(per_relation)) if per_relation else float("nan")


def spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise Spearman correlation of two (N, V) score matrices (ties broken by position;
    exact ties are measure-zero for float logits)."""

    def ranks(x: torch.Tensor) -> torch.Tensor:
        order = x.argsort(dim=-1)
        r = torch.empty_like(order, dtype=torch.float64)
        r.scatter_(-1, order, torch.arange(x.shape[-1], device=x.device, dtype=torch.float64).expand_as(order).contiguous())
        return r

    ra, rb = ranks(a.float()), ranks(b.float())
    ra = ra - ra.mean(-1, keepdim=True)
    rb = rb - rb.mean(-1, keepdim=True)
    return (ra * rb).sum(-1) / (ra.norm(dim=-1) * rb.norm(dim=-1))
