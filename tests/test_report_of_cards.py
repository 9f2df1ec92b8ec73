"""`report` of two report cards reads them as evaluations (issue 48): no epochs, no selection, no
"unfinished", no loss plot; and its legends sit beside the panels, not over their points."""

from __future__ import annotations

import json
import shutil

from PIL import Image

from negtrain import cli


def _card_from(fake_run, folder, shift: float = 0.0):
    """A card-shaped directory: the run's recipe, and its last epoch's evaluations as one
    ``validate`` line each (a card trains nothing)."""
    shutil.copytree(fake_run, folder)
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    evals = [x for x in lines if "benchmark" in x]
    last = max(x["epoch"] for x in evals)
    card = []
    for x in evals:
        if x["epoch"] == last:
            metrics = {k: (v + shift if isinstance(v, float) and k != "n" else v) for k, v in x["metrics"].items()}
            card.append({**x, "epoch": 0, "stage": "validate", "metrics": metrics})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in card))
    shutil.rmtree(folder / "checkpoints", ignore_errors=True)
    return folder


def test_report_of_two_cards_mentions_no_epochs_and_nothing_unfinished(fake_run, tmp_path, capsys):
    a, b = _card_from(fake_run, tmp_path / "cardA"), _card_from(fake_run, tmp_path / "cardB", shift=0.05)
    assert cli.main(["report", "--run", str(a), "--run", str(b)]) == 0
    out = a / "report-vs-cardB"
    summary = (out / "summary.md").read_text()
    assert "\n## Recipe: cardA" in summary
    summary = summary.split("\n## Recipe: ")[0]  # the recipes, as written, name their trainer settings
    assert "epoch" not in summary.lower() and "unfinished" not in summary and "selection" not in summary
    assert "loss" not in summary.replace("loss_", "")
    assert summary.startswith("# Evaluation report: cardA vs cardB")
    assert "| benchmark | metric | cardA | cardB |" in summary
    assert not (out / "loss.png").exists()
    assert "loss.png" not in capsys.readouterr().out
    with Image.open(out / "metrics.png") as img:
        assert img.text["negtrain:panels"].split(",") == ["scone/test", "monli/test"]


def test_the_legend_sits_beside_each_panel(fake_run, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from negtrain.runs.reading import RunDir
    from negtrain.runs.report import plot_metrics

    a, b = _card_from(fake_run, tmp_path / "cardA"), _card_from(fake_run, tmp_path / "cardB", shift=0.05)
    placed, original = [], Figure.savefig

    def spy(fig, *args, **kwargs):
        fig.canvas.draw()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is not None:
                placed.append(legend.get_window_extent().x0 >= ax.get_window_extent().x1)
        return original(fig, *args, **kwargs)

    try:
        Figure.savefig = spy
        plot_metrics([RunDir(a), RunDir(b)], tmp_path / "m.png")
    finally:
        Figure.savefig = original
    assert placed and all(placed)
