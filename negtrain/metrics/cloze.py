"""Metrics of negated and misprimed cloze probes (negated LAMA), per source and overall.

Each probe is scored from one row of numbers the model family computes with :func:`cloze_rows`
(the masked-LM evaluator in :mod:`negtrain.models.mlm`, the causal one in :mod:`negtrain.models.lm`):
the top-1 token at the blank of the affirmative, the negated and the misprimed cloze over the
model's whole vocabulary (ids in a token space), the top-1 of the affirmative and the negated
cloze over LAMA's common vocabulary, the Spearman correlation of the two over that vocabulary,
the gold object's rank and the affirmative top-k. A probe that is not scored is counted in
``n_skipped``, never as wrong: its object is outside LAMA's common vocabulary or not one token
of the model's vocabulary, or the family cannot fill its blank (a causal LM where the blank does
not end the sentence).

**LAMA's common vocabulary** (Petroni et al. 2019; ``common_vocab_cased.txt``, 21,018 words, see
:func:`negtrain.benchmarks.negated_lama.common_vocabulary`): Kassner & Schütze's scoring
(facebookresearch/LAMA, ``lama/evaluation_metrics.py``, ``get_negation_metric``, called from
``scripts/batch_eval_KB_completion.py``) takes the log-probabilities at the mask over this
vocabulary only, and drops probes whose object is not in it. Here each word is mapped to the one
token it is for the scored model (``" " + word``); a word the tokenizer splits into several
tokens, or that maps onto a token an earlier word already took (an uncased model), is left out of
the ranking, and how many were left out is reported as ``common_vocab_left_out``.

Definitions:

- ``rank_correlation``: Kassner & Schütze 2020, Table 1, column ρ: per probe
  ``scipy.stats.spearmanr`` of the affirmative and the negated log-probabilities over the common
  vocabulary (tied values get the average of their ranks), **averaged over the probes of each
  relation file** (one file per TREx and GoogleRE relation, one for ConceptNet, one for SQuAD),
  as the authors' script averages per file. ``rank_correlation/<source>`` is the mean of its
  relation files' averages (TREx: 41 files, GoogleRE: 3; ConceptNet and SQuAD: one file each):
  Table 1's cell for that source. ``rank_correlation`` (overall, which the paper does not
  tabulate) is the mean over every relation file. A probe whose ρ is undefined (a constant
  distribution) is left out of the mean. Lower means the negation changed the predictions more.
- ``top1_overlap``: K&S Table 1, column %: 1 if the affirmative and negated top-1 over the common
  vocabulary are the same word, aggregated like ρ (per file, then per source / overall).
- ``affirmative_top1_accuracy``: P@1 (Petroni et al. 2019) as a mean over the scored probes, with
  the top-1 over the model's *whole* vocabulary (as ``negated_probes`` reports it). LAMA's own
  script ranks the common vocabulary only (``run_thread``: "compute the ranking metrics on the
  filtered log_probs tensor"), so its P@1 is at least this one (the gold object is always in that
  vocabulary here); each prediction line's ``common_top1.affirmative`` is LAMA's top-1.
  ``affirmative_top1_accuracy_macro`` averages the per-relation P@1 as LAMA's Table 2 does.
- ``negated_top1_error``: Hosseini et al. 2021: 1 if the negated cloze's top-1 (whole
  vocabulary) is the affirmative's gold object. Lower is better.
- ``mispriming_rate``: K&S Table 3 ("absolute precision drop"): over the probes whose affirmative
  cloze is answered correctly, the fraction whose misprimed cloze is not (both top-1s over the
  whole vocabulary, like ``affirmative_top1_accuracy``). Lower is better.
- ``misprime_top1_rate``: the fraction of probes whose misprimed cloze's top-1 is the misprime
  itself (any casing). Lower is better.
- ``n_probes``, ``n_skipped``, ``common_vocab_left_out``: counts.

Uncertainty: the resampled unit is the probe (a relation file's average is recomputed from the
resampled probes of that file); every plain mean gets lm-eval's stderr, the per-file averages the
bootstrap's.

Prediction lines (``predictions/negated_lama-<split>-<stage>.jsonl``) carry, per probe, what
``evaluate --predictions`` needs to recompute every number: the top-1 tokens, the common-vocabulary
top-1s, ρ, the gold token and its rank, the prime tokens, the affirmative top-k, or why the probe
was skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from negtrain.metrics.base import ExampleMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, ratios, unit_table
from negtrain.metrics.torchmetrics_core import dim_zero_cat

SKIPPED = -3  # the probe is not scored
NOT_IN_SPACE = -2  # the gold object (or prime) has no id in the prediction space
NOT_EVALUATED = -1

#: Columns of a probe's row.
AFF, NEG, MIS, RHO, CAFF, CNEG, RANK = range(7)
TOP_K = 10
WIDTH = 7 + TOP_K
CLOZES = ("affirmative", "negated", "misprimed")


def average_ranks(x: torch.Tensor) -> torch.Tensor:
    """Row-wise ranks (1-based) of an (N, V) tensor, tied values getting the mean of their ranks
    (scipy.stats.rankdata's 'average', which spearmanr uses)."""
    n, v = x.shape
    values, order = x.sort(dim=-1, stable=True)
    new = torch.ones_like(values, dtype=torch.bool)
    new[:, 1:] = values[:, 1:] != values[:, :-1]
    group = new.long().cumsum(-1) - 1 + (torch.arange(n, device=x.device) * v).unsqueeze(1)  # unique per row
    pos = torch.arange(1, v + 1, device=x.device, dtype=torch.float64).expand(n, v).reshape(-1)
    flat = group.reshape(-1)
    first = torch.full((n * v,), float("inf"), dtype=torch.float64, device=x.device).scatter_reduce(0, flat, pos, "amin")
    last = torch.zeros(n * v, dtype=torch.float64, device=x.device).scatter_reduce(0, flat, pos, "amax")
    mean_rank = ((first + last) / 2)[flat].view(n, v)
    return torch.empty_like(mean_rank).scatter_(-1, order, mean_rank)


def spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise Spearman correlation of two (N, V) score matrices, as ``scipy.stats.spearmanr``:
    the Pearson correlation of the average ranks (NaN where a row is constant)."""
    ra, rb = average_ranks(a.double()), average_ranks(b.double())
    ra = ra - ra.mean(-1, keepdim=True)
    rb = rb - rb.mean(-1, keepdim=True)
    return (ra * rb).sum(-1) / (ra.norm(dim=-1) * rb.norm(dim=-1))


def cloze_rows(aff: torch.Tensor, neg: torch.Tensor, mis: torch.Tensor, vocab_to_space: torch.Tensor,
               common: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """(B, WIDTH) float64 rows of :class:`NegatedLamaMetric` from the scores at the blank of the
    affirmative, negated and misprimed cloze ((B, V) each, over the model's vocabulary).

    ``common``: vocabulary ids of LAMA's common vocabulary for this model; ``gold``: (B,) the
    gold object's vocabulary id (negative: none, its rank is NaN)."""
    lp = [torch.log_softmax(x.float(), dim=-1) for x in (aff, neg, mis)]  # LAMA ranks log-probabilities
    space = vocab_to_space.to(aff.device)
    common = common.to(aff.device)
    out = torch.full((aff.shape[0], WIDTH), float("nan"), dtype=torch.float64, device=aff.device)
    for k in (AFF, NEG, MIS):
        out[:, k] = space[lp[k].argmax(-1)].double()
    restricted_aff, restricted_neg = lp[AFF][:, common], lp[NEG][:, common]
    out[:, RHO] = spearman(restricted_aff, restricted_neg)
    out[:, CAFF] = space[common[restricted_aff.argmax(-1)]].double()
    out[:, CNEG] = space[common[restricted_neg.argmax(-1)]].double()
    gold = gold.to(aff.device)
    has_gold = gold >= 0
    at_gold = lp[AFF].gather(1, gold.clamp_min(0).unsqueeze(1))
    rank = (lp[AFF] > at_gold).sum(-1).double() + 1
    out[:, RANK] = torch.where(has_gold, rank, torch.full_like(rank, float("nan")))
    k = min(TOP_K, lp[AFF].shape[-1])
    out[:, RANK + 1 : RANK + 1 + k] = space[lp[AFF].topk(k, dim=-1).indices].double()
    return out


def skipped_rows(n: int) -> torch.Tensor:
    """Rows of probes the family cannot score."""
    out = torch.full((n, WIDTH), float("nan"), dtype=torch.float64)
    out[:, :3] = SKIPPED
    out[:, CAFF : CNEG + 1] = SKIPPED
    return out


class NegatedLamaMetric(ExampleMetric):
    """The negated-LAMA metrics of the module docstring.

    ``gold``: per probe the gold object's space id, or SKIPPED when the probe is not scored (its
    object is outside the common vocabulary or not one token); ``files``: per probe its relation
    file (what ρ and the overlap are averaged over); ``relations``: LAMA's relation (for the
    macro P@1); ``space``: the token strings the ids index (for the prediction lines)."""

    resampling_unit = "probe"
    rows: list[torch.Tensor]  # a state (see ExampleMetric.indices)

    def __init__(
        self,
        gold: Sequence[int],
        primes: Sequence[Sequence[int]],
        sources: Sequence[str],
        relations: Sequence[str],
        files: Sequence[str] | None = None,
        note: str | None = None,
        space: Sequence[str] = (),
        common_vocab_left_out: int = 0,
        skip_reasons: Sequence[str | None] | None = None,
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
        self.files = np.asarray(files if files is not None else relations, dtype=object)
        self.note = note
        self.space = tuple(space)
        self.common_vocab_left_out = int(common_vocab_left_out)
        self.skip_reasons = list(skip_reasons) if skip_reasons is not None else [None] * len(gold)
        self.add_state("rows", default=[], dist_reduce_fx="cat")
        self.table: np.ndarray | None = None
        self.source_names = sorted(set(self.sources))
        self.file_names = sorted(set(self.files))
        self.relation_names = sorted(set(self.relations))

    def update(self, indices: torch.Tensor, predictions: torch.Tensor) -> None:
        """``predictions``: (B, WIDTH) float64 rows of :func:`cloze_rows`."""
        self.indices.append(indices.detach().to(torch.long).flatten())
        self.rows.append(predictions.detach().to(torch.float64).reshape(-1, WIDTH))

    def compute(self) -> dict[str, torch.Tensor]:
        table = np.full((self.num_examples, WIDTH), np.nan)
        table[:, :3] = NOT_EVALUATED
        table[:, CAFF : CNEG + 1] = NOT_EVALUATED
        if len(self.indices):
            idx = dim_zero_cat(self.indices).cpu().numpy()
            table[idx] = dim_zero_cat(self.rows).cpu().numpy()
        # A probe outside the common vocabulary is skipped, whatever the model predicted for it.
        evaluated = table[:, AFF] != NOT_EVALUATED
        out_of_vocab = (self.gold == SKIPPED) & evaluated
        table[out_of_vocab, :3] = SKIPPED
        table[out_of_vocab, CAFF : CNEG + 1] = SKIPPED
        self.table = table
        top = table[:, AFF].astype(np.int64)
        self.last_predictions = np.where(top >= 0, top, NOT_EVALUATED)
        self.last_outcomes = table
        return {k: torch.tensor(float(v), dtype=torch.float64) for k, v in self.score(table).items()}

    def score(self, table: np.ndarray) -> dict[str, float]:
        if table.ndim == 1:  # a flat prediction array (e.g. for the metric names): nothing scored
            table = np.full((len(table), WIDTH), np.nan)
            table[:, :3] = NOT_EVALUATED
            table[:, CAFF : CNEG + 1] = NOT_EVALUATED
        return super().score(table)

    def unit_table(self, table: np.ndarray) -> UnitTable:
        top = np.nan_to_num(table[:, :3], nan=NOT_EVALUATED).astype(np.int64)
        common = np.nan_to_num(table[:, CAFF : CNEG + 1], nan=NOT_EVALUATED).astype(np.int64)
        scored = top[:, AFF] >= 0
        aff_right = (top[:, AFF] == self.gold) & scored
        mis_right = top[:, MIS] == self.gold
        prime_won = (self.primes == top[:, MIS : MIS + 1]).any(axis=1) & scored
        rho = table[:, RHO]
        has_rho = scored & np.isfinite(rho)
        overlap = (common[:, 0] == common[:, 1]) & scored
        per_probe = {
            "scored": scored,
            "skipped": top[:, AFF] == SKIPPED,
            "aff_right": aff_right,
            "neg_error": (top[:, NEG] == self.gold) & scored,
            "aff_then_mis_wrong": aff_right & ~mis_right,
            "prime_won": prime_won,
        }
        for source in self.source_names:
            member = self.sources == source
            for name in ("scored", "aff_right", "neg_error", "aff_then_mis_wrong", "prime_won"):
                per_probe[f"{name}/{source}"] = per_probe[name] & member
        for relation in self.relation_names:
            member = self.relations == relation
            per_probe[f"scored@{relation}"] = scored & member
            per_probe[f"aff_right@{relation}"] = aff_right & member
        for file in self.file_names:
            member = self.files == file
            per_probe[f"rho_n#{file}"] = has_rho & member
            per_probe[f"rho_sum#{file}"] = np.where(has_rho & member, rho, 0.0)
            per_probe[f"overlap_n#{file}"] = scored & member
            per_probe[f"overlap_sum#{file}"] = overlap & member
        return unit_table("probe", np.arange(self.num_examples), self.num_examples, per_probe)

    def _file_means(self, t: Mapping[str, np.ndarray], what: str, files: Sequence[str]) -> np.ndarray:
        """The mean over ``files`` of each file's mean (files without a scored probe left out)."""
        per_file = np.stack([ratios(t[f"{what}_sum#{f}"], t[f"{what}_n#{f}"]) for f in files]) if files else np.full((1,), np.nan)
        with np.errstate(all="ignore"):
            counted = np.isfinite(per_file).sum(axis=0)
            total = np.where(np.isfinite(per_file), per_file, 0.0).sum(axis=0)
            return np.where(counted > 0, total / np.maximum(counted, 1), np.nan)

    def _macro(self, t: Mapping[str, np.ndarray], relations: Sequence[str]) -> np.ndarray:
        per_relation = [ratios(t[f"aff_right@{r}"], t[f"scored@{r}"]) for r in relations]
        if not per_relation:
            return np.asarray(np.nan)
        stacked = np.stack(per_relation)
        counted = np.isfinite(stacked).sum(axis=0)
        total = np.where(np.isfinite(stacked), stacked, 0.0).sum(axis=0)
        with np.errstate(all="ignore"):
            return np.where(counted > 0, total / np.maximum(counted, 1), np.nan)

    def _block(self, t: Mapping[str, np.ndarray], suffix: str, files: Sequence[str]) -> dict[str, np.ndarray | Mean]:
        scored = t[f"scored{suffix}"]
        return {
            "affirmative_top1_accuracy": Mean(t[f"aff_right{suffix}"], scored),
            "negated_top1_error": Mean(t[f"neg_error{suffix}"], scored),
            "rank_correlation": self._file_means(t, "rho", files),
            "top1_overlap": self._file_means(t, "overlap", files),
            "mispriming_rate": Mean(t[f"aff_then_mis_wrong{suffix}"], t[f"aff_right{suffix}"]),
            "misprime_top1_rate": Mean(t[f"prime_won{suffix}"], scored),
        }

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out = self._block(t, "", self.file_names)
        out["affirmative_top1_accuracy_macro"] = self._macro(t, self.relation_names)
        for source in self.source_names:
            files = sorted({f for f, s in zip(self.files, self.sources, strict=False) if s == source})
            relations = sorted({r for r, s in zip(self.relations, self.sources, strict=False) if s == source})
            for k, v in self._block(t, f"/{source}", files).items():
                out[f"{k}/{source}"] = v
            out[f"affirmative_top1_accuracy_macro/{source}"] = self._macro(t, relations)
        out["n_probes"] = t["scored"]
        out["n_skipped"] = t["skipped"]
        out["common_vocab_left_out"] = np.full(np.shape(t["scored"]), float(self.common_vocab_left_out))
        return out

    # -- prediction lines ------------------------------------------------------------------------

    def prediction_fields(self) -> list[dict | None] | None:
        """Per evaluated probe, what its prediction line carries (see the module docstring)."""
        if self.table is None:
            return None
        token = (lambda i: self.space[int(i)] if 0 <= i < len(self.space) else None)
        out: list[dict | None] = []
        for i, row in enumerate(self.table):
            if row[AFF] == NOT_EVALUATED:
                out.append(None)
                continue
            base = {"common_vocab_left_out": self.common_vocab_left_out}
            if row[AFF] == SKIPPED:
                out.append({**base, "skipped": self.skip_reasons[i] or "the family cannot score this probe"})
                continue
            rank = row[RANK]
            out.append({
                **base,
                "gold_token": token(self.gold[i]),
                "top1": {c: token(row[k]) for k, c in zip((AFF, NEG, MIS), CLOZES, strict=False)},
                "common_top1": {"affirmative": token(row[CAFF]), "negated": token(row[CNEG])},
                "rank_correlation": None if not np.isfinite(row[RHO]) else float(row[RHO]),
                "gold_rank": None if not np.isfinite(rank) else int(rank),
                "top_k": [token(x) for x in row[RANK + 1 :] if np.isfinite(x)],
                "prime_tokens": [token(p) for p in self.primes[i] if p >= 0],
            })
        return out

    @classmethod
    def from_lines(cls, examples, lines: Sequence[tuple[int, Mapping]], describe) -> tuple[NegatedLamaMetric, torch.Tensor, torch.Tensor]:
        """The metric and its (indices, rows) for prediction lines ``(position, fields)``, as the
        run that wrote them computed them. ``describe(position, message)`` raises the error for a
        malformed line."""
        strings: set[str] = set()
        for position, f in lines:
            if "skipped" in f:
                continue
            for key in ("top1", "common_top1"):
                if not isinstance(f.get(key), dict):
                    describe(position, f"'{key}' must be an object of tokens")
            strings |= {s for s in (*f["top1"].values(), *f["common_top1"].values(), f.get("gold_token"),
                                     *f.get("prime_tokens", []), *f.get("top_k", [])) if isinstance(s, str)}
        space = tuple(sorted(strings))
        lookup = {s: i for i, s in enumerate(space)}
        gold = [SKIPPED] * len(examples)
        primes: list[list[int]] = [[] for _ in examples]
        left_out = {int(f.get("common_vocab_left_out", 0)) for _, f in lines}
        if len(left_out) > 1:
            describe(lines[0][0], f"'common_vocab_left_out' differs between lines: {sorted(left_out)}")
        rows = torch.full((len(lines), WIDTH), float("nan"), dtype=torch.float64)
        for n, (position, f) in enumerate(lines):
            if "skipped" in f:
                rows[n] = skipped_rows(1)[0]
                continue
            g = f.get("gold_token")
            gold[position] = lookup[g] if isinstance(g, str) else NOT_IN_SPACE
            primes[position] = [lookup[p] for p in f.get("prime_tokens", []) if isinstance(p, str)]
            ids = lambda s: lookup[s] if isinstance(s, str) else NOT_IN_SPACE  # noqa: E731
            for k, c in zip((AFF, NEG, MIS), CLOZES, strict=False):
                rows[n, k] = ids(f["top1"].get(c))
            rows[n, CAFF], rows[n, CNEG] = ids(f["common_top1"].get("affirmative")), ids(f["common_top1"].get("negated"))
            rho = f.get("rank_correlation")
            rows[n, RHO] = float("nan") if rho is None else float(rho)
            rank = f.get("gold_rank")
            rows[n, RANK] = float("nan") if rank is None else float(rank)
            for j, s in enumerate(f.get("top_k", [])[:TOP_K]):
                rows[n, RANK + 1 + j] = ids(s)
        metric = cls(gold, primes, [e.subset for e in examples], [e.group for e in examples],
                     files=[e.meta.get("relation_file", e.group) for e in examples], space=space,
                     common_vocab_left_out=left_out.pop() if left_out else 0)
        index = torch.tensor([p for p, _ in lines], dtype=torch.long)
        return metric, index, rows
