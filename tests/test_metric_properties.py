"""Property tests: a benchmark's metric values do not depend on how its predictions arrive.

For generated splits (labels, contrast groups, subsets) and predictions, with each benchmark's
own metric class, the values are the same

- whatever the order of the predictions;
- whatever the evaluation batch size;
- however the examples are split over DDP ranks, including sizes not divisible by the number of
  ranks: each rank's share comes from the real :class:`negtrain.data.sampler.BatchSampler` (which
  pads the last round with repeated batches), each rank scores into its own metric copy, and the
  copies are merged with torchmetrics' ``merge_state`` as a DDP sync would gather them.

A real two-process gloo check is in ``test_metric_ddp.py``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from negtrain.benchmarks.base import Example
from negtrain.benchmarks.monli import Monli
from negtrain.benchmarks.nannli import OPERATIONS, NanNli
from negtrain.benchmarks.negnli import PAIR_TYPES, NegnliMnli
from negtrain.benchmarks.scone import CONDITIONS, Scone
from negtrain.data.sampler import BatchSampler


def _examples(bench: str, n_groups: int, labels: list[int], draw) -> list[Example]:
    out = []
    if bench == "scone":  # contrast sets of six, one per condition
        for g in range(n_groups):
            for c in CONDITIONS:
                out.append(Example(f"scone/t/{c}/{g}", ("p", "h"), Scone.labels[labels[len(out)] % 2], subset=c, group=f"g{g}"))
    elif bench == "negnli":  # triples, one per pair type
        for g in range(n_groups):
            for t in PAIR_TYPES:
                out.append(Example(f"n/{g}/{t}", ("p", "h"), NegnliMnli.labels[labels[len(out)] % 3], subset=t, group=f"g{g}"))
    elif bench == "nannli":  # several hypotheses per premise
        for g in range(n_groups):
            for k in range(1 + g % 3):
                ops = tuple(op for j, op in enumerate(OPERATIONS) if (g + k + j) % 3 == 0)
                out.append(Example(f"nan/{g}/{k}", ("p", "h"), NanNli.labels[labels[len(out)] % 3],
                                   subset=("a", "b")[k % 2], group=f"premise/{g}", meta={"operations": ops}))
    else:
        for g in range(n_groups):
            out.append(Example(f"monli/t/{g}", ("p", "h"), Monli.labels[labels[g] % 2]))
    return out


BENCHES = {"scone": Scone(), "monli": Monli(), "negnli": NegnliMnli(), "nannli": NanNli()}


@st.composite
def scored_split(draw):
    name = draw(st.sampled_from(sorted(BENCHES)))
    n_groups = draw(st.integers(1, 12))
    labels = draw(st.lists(st.integers(0, 5), min_size=6 * n_groups, max_size=6 * n_groups))
    examples = _examples(name, n_groups, labels, draw)
    bench = BENCHES[name]
    n_classes = len(bench.labels)
    preds = draw(st.lists(st.integers(0, n_classes - 1), min_size=len(examples), max_size=len(examples)))
    return bench, examples, np.array(preds)


def _values(metric) -> dict[str, float]:
    return {k: float(v) for k, v in metric.compute().items()}


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)


def _score(bench, examples, preds, batches) -> dict[str, float]:
    metric = bench.metric(examples)
    for batch in batches:
        idx = torch.as_tensor(np.asarray(batch, dtype=np.int64))
        metric.update(idx, torch.as_tensor(preds[idx.numpy()]))
    return _values(metric)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scored_split(), st.randoms(use_true_random=False), st.integers(1, 17))
def test_order_and_batch_size_do_not_matter(split, rnd, batch_size):
    bench, examples, preds = split
    n = len(examples)
    reference = _score(bench, examples, preds, [list(range(n))])
    order = list(range(n))
    rnd.shuffle(order)
    shuffled = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    assert _same(_score(bench, examples, preds, shuffled), reference)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scored_split(), st.integers(1, 5), st.integers(1, 9), st.booleans())
def test_rank_splits_do_not_matter(split, world, batch_size, bucket):
    bench, examples, preds = split
    n = len(examples)
    reference = _score(bench, examples, preds, [list(range(n))])
    lengths = np.array([len(e.id) for e in examples])
    merged = bench.metric(examples)
    seen = []
    for rank in range(world):
        sampler = BatchSampler(lengths, batch_size, shuffle=False, bucket=bucket, num_replicas=world, rank=rank)
        batches = list(sampler)
        assert len(batches) == len(sampler)  # every rank steps equally often
        copy = bench.metric(examples)
        for batch in batches:
            idx = torch.tensor(batch, dtype=torch.long)
            copy.update(idx, torch.as_tensor(preds[idx.numpy()]))
            seen += batch
        merged.merge_state(copy)
    assert set(seen) == set(range(n))  # padding repeats examples, never drops one
    assert _same(_values(merged), reference)
