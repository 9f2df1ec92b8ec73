"""report: valid PNGs with one panel per benchmark, and a Markdown summary."""

from __future__ import annotations

import shutil

from PIL import Image

from negtrain import cli


def _png(path):
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size[0] > 300 and img.size[1] > 200
        return img.text.get("negtrain:panels", "").split(",")


def test_report_single_run(fake_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(fake_run, run)
    assert cli.main(["report", "--run", str(run)]) == 0
    out = run / "report"
    assert _png(out / "metrics.png") == ["scone/test", "monli/test"]
    assert _png(out / "loss.png") == ["training loss"]
    summary = (out / "summary.md").read_text()
    # Best epoch per metric: scone accuracy peaks at epoch 1, monli accuracy at epoch 2.
    # With the best epoch's stderr and interval; monli's lines recorded none.
    assert "| scone/test | accuracy | 0.7731 | ±0.0121 | [0.7431, 0.7981] | 1 | higher |" in summary
    assert "| monli/test | accuracy | 0.5200 | - | - | 2 | higher |" in summary
    assert "| scone/test | consistency | 0.4731 | ±0.0340 | [0.4031, 0.5431] | 1 | higher |" in summary
    assert "scone/test: 200 contrast sets" in summary
    # Final table and recipe.
    assert "| scone/test | accuracy | 0.7000 [0.6700, 0.7250] |" in summary
    assert "learning_rate: 5.0e-05" in summary


def test_report_overlays_two_runs(fake_run, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(fake_run, a)
    shutil.copytree(fake_run, b)
    lines = (b / "metrics.jsonl").read_text().replace('"accuracy": 0.7,', '"accuracy": 0.9,')
    (b / "metrics.jsonl").write_text(lines)
    assert cli.main(["report", "--run", str(a), "--run", str(b)]) == 0
    out = a / "report-vs-b"
    assert _png(out / "metrics.png") == ["scone/test", "monli/test"]
    summary = (out / "summary.md").read_text()
    assert "| scone/test | accuracy | 0.7000 [0.6700, 0.7250] | 0.9000 [0.6700, 0.7250] |" in summary
    assert "## Best epoch per metric: a" in summary and "## Best epoch per metric: b" in summary


def test_report_panels_follow_the_benchmarks(fake_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(fake_run, run)
    kept = [l for l in (run / "metrics.jsonl").read_text().splitlines() if '"monli"' not in l]
    (run / "metrics.jsonl").write_text("\n".join(kept) + "\n")
    assert cli.main(["report", "--run", str(run)]) == 0
    assert _png(run / "report" / "metrics.png") == ["scone/test"]


def test_report_on_a_non_run(tmp_path, capsys):
    assert cli.main(["report", "--run", str(tmp_path)]) == 2
    assert "not a negtrain run directory" in capsys.readouterr().err


def test_report_on_a_real_run(wandb_run):
    import json

    assert cli.main(["report", "--run", str(wandb_run)]) == 0
    summary = (wandb_run / "report" / "summary.md").read_text()
    last = [json.loads(l) for l in (wandb_run / "metrics.jsonl").read_text().splitlines() if '"scone"' in l][-1]
    entry = last["uncertainty"]["accuracy"]
    value = f"{last['metrics']['accuracy']:.4f} [{entry['ci95'][0]:.4f}, {entry['ci95'][1]:.4f}]"
    assert f"| scone/test | accuracy | {value} |" in summary  # the final-epoch table
    assert "contrast sets" in summary
    assert _png(wandb_run / "report" / "metrics.png") == ["scone/dev10", "scone/test", "monli/test"]
    assert _png(wandb_run / "report" / "loss.png") == ["training loss"]


def _add_heldout(run, record_directions: bool):
    import json

    lines = []
    for epoch, loss in enumerate([3.0, 2.0, 2.5]):
        record = {"epoch": epoch, "stage": "fit", "benchmark": "cue_corpus", "split": "heldout", "eval_seconds": 1.0,
                  "metrics": {"mlm_loss": loss, "cue_recovery": 0.1 * epoch}}
        if record_directions:
            record["lower_is_better"] = ["mlm_loss"]
        lines.append(json.dumps(record) + "\n")
    with (run / "metrics.jsonl").open("a") as f:
        f.writelines(lines)


def test_best_epoch_follows_the_direction_the_run_recorded(fake_run, tmp_path):
    # The cue-masking corpus is no registered benchmark: only the run knows mlm_loss falls.
    run = tmp_path / "run"
    shutil.copytree(fake_run, run)
    _add_heldout(run, record_directions=True)
    assert cli.main(["report", "--run", str(run)]) == 0
    summary = (run / "report" / "summary.md").read_text()
    assert "| cue_corpus/heldout | mlm_loss | 2.0000 | - | - | 1 | lower |" in summary
    assert "| cue_corpus/heldout | cue_recovery | 0.2000 | - | - | 2 | higher |" in summary


def test_an_unknown_direction_is_an_error_not_a_guess(fake_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(fake_run, run)
    _add_heldout(run, record_directions=False)
    assert cli.main(["report", "--run", str(run)]) != 0
    assert "'cue_corpus/heldout' records no metric directions" in capsys.readouterr().err
