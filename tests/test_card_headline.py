"""What a card shows of each number (issue 48): the benchmark's headline under its own name
(NaN-NLI's binary F1 for 2-way predictions), beside its baseline, and the real n of a split cut by
``trainer.limit_val_batches``. The records come from the one scoring path (real data, a real
metric, predictions chosen by hand), as a run or a card would write them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from negtrain.benchmarks.registry import get_benchmark
from negtrain.core import labels as nli
from negtrain.data.eval_set import ScoredSplit
from negtrain.data.scoring import record_scored, scored_result
from negtrain.io.records import EvalRecord


def _scored(benchmark: str, space, predict, keep: int | None = None, cut_by: str | None = None) -> EvalRecord:
    """The metrics line of ``benchmark``/test with ``predict(example) -> label`` for the first
    ``keep`` examples (all: None), as the recorder writes it."""
    bench = get_benchmark(benchmark)
    examples = bench.read("test")
    metric = bench.metric(examples, space) if benchmark == "nannli" else bench.metric(examples)
    scored = ScoredSplit(bench, "test", examples, predicted_labels=tuple(space), metric=metric, cut_by=cut_by)
    kept = range(len(examples) if keep is None else keep)
    metric.update(torch.tensor(list(kept)), torch.tensor([space.index(predict(examples[i])) for i in kept]))
    scored.result = scored_result(metric, scored.name)
    return EvalRecord(record_scored(scored, 0, "validate", 1.0, bootstrap=(50, 0), predictions_dir=None, suffix="validate"))


def _binary_f1(gold: list[str], predicted: list[str]) -> float:
    """Support-weighted F1 over entailment / not_entailment, by hand."""
    total = 0.0
    for c in nli.NLI2:
        tp = sum(g == c and p == c for g, p in zip(gold, predicted, strict=True))
        fp = sum(g != c and p == c for g, p in zip(gold, predicted, strict=True))
        fn = sum(g == c and p != c for g, p in zip(gold, predicted, strict=True))
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        total += f1 * sum(g == c for g in gold)
    return total / len(gold)


def _two_way(example) -> str:  # a rule with some right and some wrong: says entailment without "not"
    return "not_entailment" if " not " in f" {example.inputs[1]} " else "entailment"


def test_a_2_way_card_shows_nannli_binary_f1_in_card_md_and_card_png(data_dir, tmp_path):
    from PIL import Image

    from negtrain.evaluation.card import write_card

    record = _scored("nannli", nli.NLI2, _two_way)
    examples = get_benchmark("nannli").read("test")
    expected = _binary_f1([nli.coarsen(e.label) for e in examples], [_two_way(e) for e in examples])
    assert record["metrics"]["binary_f1"] == pytest.approx(expected, abs=1e-6) and "f1" not in record["metrics"]
    write_card(tmp_path, [record], "m", "nli", [])
    row = next(line for line in (tmp_path / "card.md").read_text().splitlines() if line.startswith("| nannli |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2].startswith(f"{expected:.4f} [") and "] (binary_f1)" in cells[2]
    # The baseline: the binary F1 of predicting the more frequent class everywhere, by hand.
    gold = [nli.coarsen(e.label) for e in examples]
    majority = max(_binary_f1(gold, [c] * len(gold)) for c in nli.NLI2)
    assert cells[3] == f"{majority:.4f} (majority)"
    assert Image.open(tmp_path / "card.png").text["negtrain:points"] == "nannli/test"
    from negtrain.evaluation.card_render import plot_card
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    texts, original = [], Figure.savefig

    def spy(fig, *args, **kwargs):
        texts.extend(t.get_text() for ax in fig.axes for t in ax.texts)
        texts.extend(ax.get_xlabel() for ax in fig.axes)
        return original(fig, *args, **kwargs)

    try:
        Figure.savefig = spy
        plot_card([record], tmp_path / "again.png", "m")
    finally:
        Figure.savefig = original
    assert any(f"nannli/test: binary_f1 {expected:.3f}, no consistency, majority {majority:.3f}" in t for t in texts)
    assert any(t.startswith("score: binary_f1") for t in texts) and not any("NaN-NLI: F1" in t for t in texts)


def test_the_viewer_marks_2_way_nannli_examples_by_the_binary_view(data_dir):
    bench = get_benchmark("nannli")
    examples = bench.read("test")
    metric = bench.metric(examples, nli.NLI2)
    predicted = np.array([nli.NLI2.index(_two_way(e)) for e in examples])
    table = metric.unit_table(predicted)
    assert table.right is not None
    assert table.right.tolist() == [nli.coarsen(e.label) == _two_way(e) for e in examples]


def test_a_model_at_its_baseline_is_marked(data_dir, tmp_path):
    from negtrain.evaluation.card import write_card

    # Always "not_entailment" on NegNLI-RTE: the majority baseline itself.
    record = _scored("negnli-rte", nli.NLI2, lambda e: "not_entailment")
    gold = [e.label for e in get_benchmark("negnli-rte").read("test")]
    share = max(gold.count(c) for c in set(gold)) / len(gold)
    assert record["baseline"]["majority"] == pytest.approx(share, abs=1e-6) and record["baseline"]["chance"] == 0.5
    write_card(tmp_path, [record], "m", "nli", [])
    row = next(line for line in (tmp_path / "card.md").read_text().splitlines() if line.startswith("| negnli-rte |"))
    assert "**≤ baseline**" in row and f"| {share:.4f} (majority) |" in row
    # One right answer more than the majority: not marked.
    better = dict(record.line, metrics={**record["metrics"], "accuracy": share + 1 / len(gold)})
    write_card(tmp_path, [EvalRecord(better)], "m", "nli", [])
    assert "**≤ baseline**" not in next(line for line in (tmp_path / "card.md").read_text().splitlines() if line.startswith("| negnli-rte |"))


def test_a_card_cut_by_limit_val_batches_says_n_of_n_in_card_md_and_protocol_md(data_dir, tmp_path):
    from negtrain.evaluation.card import write_card
    from negtrain.evaluation.protocol import protocol_markdown
    from negtrain.prompts.protocols import get_protocol

    cut = "trainer.limit_val_batches=2"
    record = _scored("scone", nli.NLI2, lambda e: "entailment", keep=32, cut_by=cut)
    assert record["subset"] == {"of": 1200, "cut_by": cut}
    # The bootstrap resamples the contrast sets the 32 examples belong to, not all 200.
    sets = {e.group for e in get_benchmark("scone").read("test")[:32]}
    assert record["bootstrap"]["units"] == len(sets) < 200
    write_card(tmp_path, [record], "m", "nli", [])
    card = (tmp_path / "card.md").read_text()
    assert f"**Part of the data.** Cut by {cut}: these numbers rest on scone/test 32 of 1,200 examples" in card
    assert "| 32 of 1,200 |" in card
    assert f"- scone/test: {len(sets)} × contrast set (those its 32 scored examples belong to)" in card
    protocol = get_protocol("scone-icl")
    records = [EvalRecord(dict(record.line, variant=v.name)) for v in protocol.variants]
    text = protocol_markdown(protocol, records, "m", 0, 0)
    assert f"Cut by {cut}: these numbers rest on scone/test (structured/zero) 32 of 1,200" in text
    assert text.count("| 32 of 1,200 |") == len(protocol.variants)
    # A protocol card's twelve variants of one split: the unit line said once.
    write_card(tmp_path, records, "m", "causal_lm", [])
    assert (tmp_path / "card.md").read_text().count("- scone/test: ") == 1


def test_the_viewer_shows_the_baseline_the_card_heads_and_no_markdown(data_dir, tmp_path):
    import json

    from negtrain.evaluation.card import write_card
    from negtrain.view.site import _markdown_tables, build

    record = _scored("negnli-rte", nli.NLI2, lambda e: "not_entailment")
    (tmp_path / "predictions").mkdir()
    rows = [{"id": e.id, "prediction": "not_entailment", "label": e.label} for e in get_benchmark("negnli-rte").read("test")]
    (tmp_path / "predictions" / "negnli-rte-test-validate.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "metrics.jsonl").write_text(json.dumps(record.line) + "\n")
    write_card(tmp_path, [record], "m", "nli", [], fresh_head="note: the starting model's classifier is freshly initialised")
    index, _ = build([tmp_path], resamples=0)
    (source,) = index["sources"]
    assert source["heads"] == ["Chance level. The starting model's classifier is freshly initialised."]
    (summary,) = source["sets"]
    assert summary["baseline"]["majority"] == record["baseline"]["majority"] and summary["at_or_below"] is True
    # NegNLI's MB column is a property of the data: no direction.
    assert summary["info"]["majority_baseline"]["role"] == "baseline"
    from importlib import resources

    viewer = (resources.files("negtrain.view") / "assets" / "viewer.js").read_text(encoding="utf-8")
    assert '"from the data, not the model"' in viewer  # the label of a baseline, not "higher is better"
    blocks = _markdown_tables("# scone-icl: `org/model`\n\n**Part of the data.** Cut.\n\n| a | `b` |\n|---|---|\n| **1** | 2 |\n")
    assert blocks == [{"text": "scone-icl: org/model"}, {"text": "Part of the data. Cut."}, {"headers": ["a", "b"], "rows": [["1", "2"]]}]


def test_an_lm_card_without_a_contrast_benchmark_plots_its_scores(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from negtrain.evaluation.card_render import plot_card

    records = [EvalRecord({"epoch": 0, "stage": "validate", "benchmark": "neqa", "split": "test",
                           "metrics": {"accuracy": 0.41, "accuracy_norm": 0.44, "n": 1718.0}})]
    labels, original = [], Figure.savefig

    def spy(fig, *args, **kwargs):
        labels.extend(ax.get_xlabel() for ax in fig.axes)
        labels.extend(t.get_text() for ax in fig.axes for t in ax.texts)
        return original(fig, *args, **kwargs)

    try:
        Figure.savefig = spy
        assert plot_card(records, tmp_path / "card.png", "m (causal_lm)") == ["neqa/test"]
    finally:
        Figure.savefig = original
    assert any(t.startswith("score: accuracy ") for t in labels) and not any("NaN-NLI" in t for t in labels)
    assert any(" 1  neqa/test: accuracy 0.410, no consistency" in t for t in labels)
