"""One progress display, the same in a terminal and a log (negtrain/training/progress_lines.py):
the terminal redraws the log's line in place; the ETA counts the evaluations left; the rate counts
training time only; a resumed run still compares its rate with its recipe's header."""

from __future__ import annotations

from pathlib import Path

from negtrain.training.progress_lines import ProgressLines


def test_a_terminal_redraws_the_same_line_a_log_prints(capsys):
    term, log = ProgressLines(60, terminal=True), ProgressLines(60, terminal=False)
    assert term.every_s == 1.0 and log.every_s == 60  # a terminal redraws every second
    term._show("progress: epoch 0/2 (0-based), step 1 of 10 (10%)")
    term._show("progress: epoch 0/2 (0-based), step 2 of 10 (20%)")
    term._end_line()
    log._show("progress: epoch 0/2 (0-based), step 2 of 10 (20%)")
    out = capsys.readouterr().out
    assert out == ("\r\x1b[Kprogress: epoch 0/2 (0-based), step 1 of 10 (10%)\r\x1b[Kprogress: epoch 0/2 (0-based), step 2 of 10 (20%)\n"
                   "progress: epoch 0/2 (0-based), step 2 of 10 (20%)\n")


def test_the_eta_counts_the_evaluations_left():
    lines = ProgressLines(60, terminal=False)
    # 100 steps left at 10 steps/s: 10 s of training; no evaluation timed yet: said, not guessed.
    assert lines.eta(100, 10.0, 2, evaluates=True) == "0:00:10 + evaluation (not timed yet)"
    lines._eval_seconds, lines._evals = 40.0, 2  # two evaluations took 20 s each
    assert lines.eta(100, 10.0, 2, evaluates=True) == "0:00:50 (evaluation included)"  # 10 + 2 × 20
    assert lines.eta(100, 10.0, 2, evaluates=False) == "0:00:10"  # a run without benchmarks


def test_a_resumed_run_reads_its_recipes_stated_rate(tmp_path):
    import torch

    from negtrain.config import TrainerConfig
    from negtrain.recipes import LoadedRecipe, available_recipes, load_recipe, recipe_needs, resolved_recipe_yaml
    from negtrain.training.run import expected_rate

    loaded = load_recipe("scone_minilm")
    needs = recipe_needs(available_recipes()["scone_minilm"])
    assert needs is not None and needs.rate is not None
    run_recipe = tmp_path / "recipe.yaml"  # as fit writes it into the run: no header, a "# recipe:" line
    run_recipe.write_text(resolved_recipe_yaml(loaded))
    resumed = LoadedRecipe(name="recipe", path=Path(run_recipe), recipe=loaded.recipe)
    cpu = TrainerConfig(accelerator="cpu")
    if needs.kind == "CPU" and not torch.cuda.is_available():
        assert expected_rate(resumed, cpu) == (needs.rate, "CPU")
