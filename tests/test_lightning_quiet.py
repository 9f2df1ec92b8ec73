"""What a run prints besides its own lines (issue 48): Lightning's restatements of what negtrain
does on purpose are silenced or made unnecessary, and the progress line says how fast, in what
numbering, and when the machine is far slower than the recipe's measurement."""

from __future__ import annotations

import warnings

from negtrain.recipes import find_recipe, recipe_needs
from negtrain.training.progress_lines import RATE_AFTER_S, slow_note


def test_resume_into_the_run_directory_does_not_warn_that_it_is_not_empty():
    from negtrain.core.third_party_logs import quiet_training_logs

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the suite ignores UserWarnings; a run does not
        quiet_training_logs()
        warnings.warn("Checkpoint directory /runs/a/checkpoints exists and is not empty.", UserWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else"]


def test_the_mid_epoch_checkpoint_says_what_it_saves():
    # Lightning logs "`weights_only` was not set, defaulting to `False`" for a save without it.
    import inspect

    from negtrain.training import preemption

    assert "save_checkpoint(self.path, weights_only=False)" in inspect.getsource(preemption)


def test_the_recipe_header_states_a_rate_and_the_progress_line_compares_with_it():
    needs = recipe_needs(find_recipe("scone_minilm")[1])
    assert needs is not None and (needs.rate, needs.kind) == (102.0, "CPU")
    expected = (needs.rate, needs.kind)
    # About 1 example/s against 102 (issue 48's loaded machine): said, once the warm-up is past.
    note = slow_note(1.0, expected, RATE_AFTER_S + 1)
    assert note == ("far below the 102 examples/s the recipe's header states for an idle CPU machine "
                    "(a busy or slower machine, not a stuck run)")
    assert slow_note(1.0, expected, RATE_AFTER_S - 1) is None  # warming up
    assert slow_note(48.0, expected, 600) is None  # an AVX2-only machine: slower, not far below
    assert slow_note(33.0, expected, 600) is not None  # under a third
    assert slow_note(1.0, None, 600) is None  # a recipe that states no rate


def test_tiny_model_prints_its_message_first(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import REPO

    out = tmp_path / "tiny"
    done = subprocess.run([sys.executable, "-m", "negtrain", "tiny-model", str(out), "--kind", "t5"], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    # The tokenizer trainer's progress, without a terminal, was blank lines before it.
    assert done.stdout.splitlines()[0].startswith(f"{out}: a 2-layer T5-style encoder-decoder"), repr(done.stdout[:200])
