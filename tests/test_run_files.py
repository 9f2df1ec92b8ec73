"""Atomic writes, choosing a checkpoint to resume from, reading checkpoints safely, and paths
that must stay where the user pointed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from negtrain.core.errors import NegtrainError
from negtrain.core.paths import contained, is_inside
from negtrain.runs.reading import RunDir
from negtrain.io.atomic import atomic_dir, write_text, write_with
from negtrain.io.checkpoints import AtomicCheckpointIO
from negtrain.io.checkpoint_reading import read_checkpoint
from negtrain.training.resume import RESUME_KEY, find_checkpoint, is_complete, rewind


def _ckpt(path: Path, epoch: int, step: int, lines: list[dict] | None = None, position: dict | None = None) -> None:
    state = {"format": 1, "rng": [], "metrics_lines": [json.dumps(x) for x in lines or []], "sampler": {}}
    if position is not None:
        state["position"] = position
    AtomicCheckpointIO().save_checkpoint(
        {"epoch": epoch, "global_step": step, "state_dict": {"w": torch.ones(2)}, "negtrain_recipe": {"seed": 1}, RESUME_KEY: state},
        path,
    )


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "metrics.jsonl"
    write_text(target, "old\n")

    def boom(out):
        out.write(b"half a li")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_with(target, boom)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]


def test_atomic_dir_appears_whole_or_not_at_all(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_dir(tmp_path / "model") as tmp:
            (tmp / "config.json").write_text("{}")
            raise RuntimeError
    assert list(tmp_path.iterdir()) == []
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "config.json").write_text("{}")
    assert [p.name for p in (tmp_path / "model").iterdir()] == ["config.json"]


def test_resume_takes_the_newest_complete_checkpoint(tmp_path):
    folder = tmp_path / "checkpoints"
    _ckpt(folder / "best-epoch0.ckpt", 0, 10)
    _ckpt(folder / "last.ckpt", 1, 20)
    chosen, skipped = find_checkpoint(tmp_path)
    assert chosen.path.name == "last.ckpt" and chosen.epoch == 1
    # A leftover temporary file is never used.
    (folder / ".last.ckpt.abc.part").write_bytes(b"half a checkpoint")
    chosen, _ = find_checkpoint(tmp_path)
    assert chosen.path.name == "last.ckpt"
    # A truncated last.ckpt (e.g. copied in by hand) is an error, not a silent fall back to
    # best-epoch0.ckpt, whose resumed run would then overwrite the newer work.
    data = (folder / "last.ckpt").read_bytes()
    (folder / "last.ckpt").write_bytes(data[: len(data) // 2])
    with pytest.raises(NegtrainError, match=r"checkpoints/last.ckpt is truncated or damaged .*; move checkpoints/last.ckpt out"):
        find_checkpoint(tmp_path)


def test_a_mid_epoch_checkpoint_beats_the_epoch_end_before_it(tmp_path):
    folder = tmp_path / "checkpoints"
    _ckpt(folder / "best-epoch0.ckpt", 0, 16)
    _ckpt(folder / "last.ckpt", 1, 22, position={"epoch": 1, "batches_done": 6, "epoch_batches": 16})
    chosen, _ = find_checkpoint(tmp_path)
    assert (chosen.path.name, chosen.batches_done, chosen.epochs_done) == ("last.ckpt", 6, 1)
    assert chosen.describe() == "epoch 1 after 6 of 16 batches, step 22"
    # Mid-way through the last epoch is not complete; its end is.
    assert not is_complete(chosen, max_epochs=2, max_steps=-1)
    _ckpt(folder / "last.ckpt", 1, 32, position={"epoch": 1, "batches_done": 16, "epoch_batches": 16})
    chosen, _ = find_checkpoint(tmp_path)
    assert (chosen.batches_done, chosen.epochs_done) == (None, 2) and is_complete(chosen, max_epochs=2, max_steps=-1)


def test_rewind_to_a_mid_epoch_checkpoint_drops_the_cut_epochs_predictions(tmp_path):
    lines = [{"epoch": 0, "benchmark": b} for b in ("monli", "train")]
    (tmp_path / "predictions").mkdir()
    for e in (0, 1):
        (tmp_path / "predictions" / f"monli-test-epoch{e}.jsonl").write_text("{}\n")
    _ckpt(tmp_path / "checkpoints" / "last.ckpt", 1, 20, lines, position={"epoch": 1, "batches_done": 4, "epoch_batches": 16})
    chosen, _ = find_checkpoint(tmp_path)
    rewind(tmp_path, chosen)
    assert [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == lines
    assert sorted(p.name for p in (tmp_path / "predictions").iterdir()) == ["monli-test-epoch0.jsonl"]


def test_resume_refuses_a_checkpoint_linking_out_of_the_run(tmp_path):
    outside = tmp_path / "elsewhere.ckpt"
    _ckpt(outside, 5, 50)
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").symlink_to(outside)
    with pytest.raises(NegtrainError, match="checkpoints/last.ckpt leads outside"):
        find_checkpoint(run)


def test_rewind_drops_the_records_of_epochs_after_the_checkpoint(tmp_path):
    lines = [{"epoch": e, "benchmark": b} for e in (0, 1) for b in ("monli", "train")]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines + [{"epoch": 2, "benchmark": "monli"}]))
    (tmp_path / "predictions").mkdir()
    for e in (0, 1, 2):
        (tmp_path / "predictions" / f"monli-test-epoch{e}.jsonl").write_text("{}\n")
    _ckpt(tmp_path / "checkpoints" / "last.ckpt", 1, 8, lines)
    chosen, _ = find_checkpoint(tmp_path)
    rewind(tmp_path, chosen)
    assert [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == lines
    assert sorted(p.name for p in (tmp_path / "predictions").iterdir()) == ["monli-test-epoch0.jsonl", "monli-test-epoch1.jsonl"]


def test_reading_checkpoints(tmp_path):
    with pytest.raises(NegtrainError, match="no such file"):
        read_checkpoint(tmp_path / "nope.ckpt")
    (tmp_path / "notes.ckpt").write_text("not a checkpoint")
    with pytest.raises(NegtrainError, match="not a PyTorch checkpoint"):
        read_checkpoint(tmp_path / "notes.ckpt")
    torch.save({"weights": torch.ones(1)}, tmp_path / "plain.ckpt")
    with pytest.raises(NegtrainError, match="no state_dict"):
        read_checkpoint(tmp_path / "plain.ckpt")
    torch.save({"state_dict": {}}, tmp_path / "foreign.ckpt")
    with pytest.raises(NegtrainError, match="not a checkpoint of a negtrain run"):
        read_checkpoint(tmp_path / "foreign.ckpt")
    torch.save({"state_dict": {}, "negtrain_recipe": {}, "code": Path("x")}, tmp_path / "pickled.ckpt")
    with pytest.raises(NegtrainError, match="weights_only"):
        read_checkpoint(tmp_path / "pickled.ckpt")


def test_paths_stay_inside_their_folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    assert is_inside(folder / "checkpoints" / "last.ckpt", folder)
    assert not is_inside(folder / ".." / "elsewhere", folder)
    (folder / "link").symlink_to(tmp_path)
    assert not is_inside(folder / "link" / "secret", folder)
    with pytest.raises(NegtrainError, match="x .* leads outside"):
        contained(tmp_path / "a" / ".." / ".." / "b", tmp_path / "a", "x")


def test_export_refuses_a_checkpoint_linking_out_of_the_run(fake_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(fake_run, run, ignore=shutil.ignore_patterns("*.ckpt"))
    (run / "checkpoints" / "last.ckpt").symlink_to(fake_run / "checkpoints" / "last.ckpt")
    with pytest.raises(NegtrainError, match="leads outside"):
        RunDir(run).checkpoint("last")


def test_the_checkpoint_callback_follows_a_moved_run(tmp_path):
    """Lightning drops the best score when its folder moved; ours re-bases the paths by file name."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from negtrain.training.checkpointing import RelocatableModelCheckpoint

    old, new = tmp_path / "old" / "checkpoints", tmp_path / "new" / "checkpoints"
    kwargs = dict(filename="best-epoch{epoch}", monitor="scone/test/accuracy", mode="max", save_top_k=1)
    before = ModelCheckpoint(dirpath=old, **kwargs)
    after = RelocatableModelCheckpoint(dirpath=new, **kwargs)
    # The same key as Lightning's own callback, so older runs' checkpoints restore into it.
    assert after.state_key == before.state_key
    best = str(old / "best-epoch0.ckpt")
    before.best_model_path, before.best_model_score = best, torch.tensor(0.535)
    before.best_k_models, before.kth_best_model_path, before.kth_value = {best: torch.tensor(0.535)}, best, torch.tensor(0.535)
    state = before.state_dict()
    after.load_state_dict(state)
    here = str(new / "best-epoch0.ckpt")
    assert (after.best_model_path, float(after.best_model_score)) == (here, pytest.approx(0.535))
    assert list(after.best_k_models) == [here] and after.kth_best_model_path == here
    assert state["best_model_path"] == best  # the checkpoint's own record is not changed
    # Lightning's callback loses the score in the same situation (what the subclass fixes).
    plain = ModelCheckpoint(dirpath=new, **kwargs)
    with pytest.warns(UserWarning, match="dirpath has changed"):
        plain.load_state_dict(state)
    assert plain.best_model_score is None


def test_metrics_records_read_typed_and_write_back_byte_for_byte(tmp_path):
    """The one reader gives each line its record type, and the one writer gives back the same
    bytes (key order, float spelling, an older run's line without ``stage``, an unknown field)."""
    from negtrain.core.errors import NegtrainError
    from negtrain.io.records import CardRecord, EvalRecord, TrainRecord, read_records, write_records

    lines = [
        '{"epoch": 0, "stage": "fit", "benchmark": "scone", "split": "test", "metrics": {"accuracy": 0.5, "consistency": null, "n": 16}, '
        '"lower_is_better": [], "eval_seconds": 0.272, "uncertainty": {"accuracy": {"stderr": 0.125, "ci95": [0.25, 0.7372]}}, '
        '"bootstrap": {"unit": "contrast set", "units": 2, "resamples": 1000, "seed": 0}}',
        '{"epoch": 0, "stage": "fit", "benchmark": "train", "split": "train", "metrics": {"loss": 0.693147}, "train_examples": 16, '
        '"train_seconds": 1.5, "train_examples_per_second": 10.67, "global_step": 2, "sources": {"mnli/train": {"size": 9, "share": 1.0, "examples": 16}}}',
        '{"epoch": 1, "benchmark": "monli", "split": "test", "metrics": {"accuracy": 1e-07}, "a_later_field": [1, 2]}',
        '{"epoch": 0, "stage": "validate", "benchmark": "scone", "split": "test", "metrics": {"accuracy": 0.25}, "requests": {"sent": 3, "cached": 1, "tokens_in": 40, "tokens_out": 2}}',
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    records = read_records(path)
    assert [type(r) for r in records] == [EvalRecord, TrainRecord, EvalRecord, CardRecord]
    scored, train, old, served = records
    assert (scored.name, scored.epoch, scored.metrics["consistency"], scored.bootstrap["units"]) == ("scone/test", 0, None, 2)
    assert scored.uncertainty["accuracy"]["ci95"] == [0.25, 0.7372] and scored.lower_is_better == []
    assert (train.loss, train.global_step, train.train_examples, train.sources["mnli/train"]["examples"]) == (0.693147, 2, 16, 16)
    assert (old.stage, old.lower_is_better, old.uncertainty, old.bootstrap) == ("fit", None, {}, None)
    assert served.requests["sent"] == 3 and served.missing == []
    # A record is also its line, read by name.
    assert scored["metrics"]["n"] == 16 and dict(old)["a_later_field"] == [1, 2]
    write_records(tmp_path / "again.jsonl", records)
    assert (tmp_path / "again.jsonl").read_text(encoding="utf-8") == "\n".join(lines) + "\n"

    path.write_text(lines[0] + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(NegtrainError, match=r"metrics.jsonl:2: not a metrics record"):
        read_records(path)
    path.write_text(lines[0] + "\n{\"epoch\": \n", encoding="utf-8")
    with pytest.raises(NegtrainError, match=r"metrics.jsonl:2: invalid JSON"):
        read_records(path)
