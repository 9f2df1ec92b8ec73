"""Running a recipe: the run directory, the Trainer and its callbacks."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import shlex
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.utilities.exceptions import SIGTERMException
from lightning.pytorch.utilities import rank_zero_only

from negtrain.benchmarks.test_rows import check_recipe_selection, check_training, trained_test_rows, trained_on_test_note
from negtrain.config import loads_here, selected_on_test_note, selection_bias_note
from negtrain.core.errors import ConfigError, NegtrainError, Stopped
from negtrain.io.atomic import atomic_dir, write_text
from negtrain.io.checkpoints import AtomicCheckpointIO
from negtrain.io.records import RunRecord
from negtrain.io.run_lock import run_lock
from negtrain.core.memory import release_freed_memory
from negtrain.models.adapters import save_adapter_config
from negtrain.core.paths import resume_command
from negtrain.evaluation.plan import EvalPlan
from negtrain.recipes import LoadedRecipe, recipe_needs, resolved_recipe_yaml
from negtrain.core.secrets import redact_text
from negtrain.core.third_party_logs import quiet_training_logs
from negtrain.models import provenance
from negtrain.training import progress_lines, tracking
from negtrain.training.build import best_score, build, reload_weights
from negtrain.models.contract import Built
from negtrain.training.checkpointing import RelocatableModelCheckpoint
from negtrain.training.checks import evaluation_precision, trainer_precision
from negtrain.training.preemption import MidEpochCheckpoint
from negtrain.training.recorder import RunRecorder, table_width, wrapped
from negtrain.training.resume import ResumeState, check_checkpoint_fits, check_run_dir, plan_resume
from negtrain.training.tracking import WandbTracker
from negtrain.training.fit_selection import check_resumed_recipe, fit_selection


def default_run_dir(recipe_name: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    # Trials of a W&B sweep (several agents may start in the same second) get their run id too.
    if os.environ.get("WANDB_SWEEP_ID") and os.environ.get("WANDB_RUN_ID"):
        stamp += "-" + os.environ["WANDB_RUN_ID"]
    return Path("checkpoints") / recipe_name / stamp


def _check_new_run_dir(run_dir: Path) -> None:
    if (run_dir / "metrics.jsonl").exists():
        raise ConfigError(
            f"--output-dir {run_dir} already holds a run (metrics.jsonl); choose another directory, "
            f"or continue it with: {resume_command(run_dir)}"
        )


def _build(loaded: LoadedRecipe, stage: str, plan: EvalPlan | None = None) -> tuple[LoadedRecipe, Built]:
    """:func:`build`, with recipe mistakes found there (benchmarks, model) naming the recipe file;
    with the recipe as resolved (negtrain.evaluation.plan), which the run records."""
    if not loads_here(loaded.recipe.evaluation.backend):
        # Training and validate/test load the model here; a served model is scored by a card.
        raise ConfigError(
            f"{loaded.path}: evaluation.backend {loaded.recipe.evaluation.backend}: a served model is scored by a report card "
            "(evaluate --model NAME --backend openai --base-url URL); fit, validate and test load the model here (backend hf)"
        )
    try:
        built = build(loaded.recipe, stage=stage, plan=plan)
    except ConfigError as exc:
        raise ConfigError(f"{loaded.path}: {exc}") from exc
    return dataclasses.replace(loaded, recipe=built.plan.recipe), built


def _prepare_run_dir(loaded: LoadedRecipe, run_dir: Path) -> Path:
    _check_new_run_dir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # The resolved recipe sits next to the weights: what ran, with every default filled in.
    write_text(run_dir / "recipe.yaml", resolved_recipe_yaml(loaded))
    return run_dir


def _provenance(loaded: LoadedRecipe, built: Built, checkpoint: Path | None = None, stage: str = "fit") -> dict | None:
    """The run's provenance (:mod:`negtrain.models.provenance`), collected by the process that
    writes the run's files (global rank 0) only; with the precision ``stage`` runs in."""
    if rank_zero_only.rank != 0:  # type: ignore[attr-defined]  # Lightning sets the rank on the function
        return None
    precision, _ = stage_precision(loaded.recipe.trainer, stage)
    selection = None
    if stage == "fit":
        sel, rule = built.selection, loaded.recipe.selection
        selection = {"epoch": rule.epoch, "metric": sel.monitor if sel else None, "on_test_split": bool(sel and sel.on_test)}
    record = provenance.collect(loaded.recipe, precision, getattr(built.module.model, "config", None), checkpoint,
                                dtype=computed_dtype(built.module.model, precision), selection=selection)
    trained = trained_test_rows(loaded.recipe) if stage == "fit" else []
    if trained:  # trained on rows of a split it reports as test (data.allow_test_rows: true)
        record["trained_on_test"] = [{"train": source, "reported": reported} for source, reported in trained]
    return record


#: What a Lightning precision computes in; None: the weights' own dtype (no cast, no autocast).
_PRECISION_DTYPE = {"bf16-mixed": "bfloat16 (autocast)", "bf16-true": "bfloat16", "16-mixed": "float16 (autocast)",
                    "16-true": "float16", "64-true": "float64", "transformer-engine": "fp8 (Transformer Engine)"}


def computed_dtype(model: Any, precision: str) -> str | None:
    """The dtype a model computes in under ``precision``: 32-true leaves a model in the dtype its
    weights were loaded in (a bf16 checkpoint runs in bfloat16), so that is read from its weights."""
    if precision in _PRECISION_DTYPE:
        return _PRECISION_DTYPE[precision]
    params = model.parameters() if model is not None else iter(())
    dtype = next((p.dtype for p in params if p.is_floating_point()), None)
    return str(dtype).removeprefix("torch.") if dtype is not None else None


def _write_provenance(run_dir: Path, record: dict | None, resuming: bool) -> None:
    if record is None:
        return
    if not resuming:
        provenance.write(run_dir, record)
        return
    # A resumed run keeps what it started with, and notes each resumption's software and machine.
    for line in provenance.write_resumed(run_dir, record):
        print(f"warning: resumed with a different setup: {line}", flush=True)


def stage_precision(t, stage: str) -> tuple[str, str | None]:
    """Training runs in ``trainer.precision`` as resolved for this machine; an evaluation-only stage
    in the model's own dtype unless a lower precision is set (:func:`evaluation_precision`)."""
    return trainer_precision(t) if stage == "fit" else evaluation_precision(t)


def _trainer(loaded: LoadedRecipe, built: Built, run_dir: Path, stage: str, logger=None) -> pl.Trainer:
    t = loaded.recipe.trainer
    if t.torch_threads:
        torch.set_num_threads(t.torch_threads)
    tracker = None
    if logger is not None:
        names = [s.name for s in built.data.eval_sets]
        tracker = WandbTracker(logger, run_dir, names, log_predictions=loaded.recipe.logger.log_predictions)
    # The recorder hands every record it writes to the tracker: the callbacks' order does not matter.
    sel = built.selection if stage == "fit" else None
    callbacks: list[pl.Callback] = [
        RunRecorder(run_dir, stage=stage, listeners=[tracker.record] if tracker else [],
                    selected_on_test=sel.monitor if sel and sel.on_test else None,
                    trained_on_test={reported: source for source, reported in trained_test_rows(loaded.recipe)}),
        ReleaseFreedMemory(),
    ]
    if stage == "fit" and t.ema_decay is not None:
        from lightning.pytorch.callbacks import WeightAveraging
        from torch.optim.swa_utils import get_ema_multi_avg_fn

        # First, so every other callback's evaluation hooks see the averaged weights. Buffers are
        # not averaged: a transformer's are integer tables (position ids, our head maps). Not
        # EMAWeightAveraging: it updates tensor by tensor, 207 ms a step on MiniLM against 19 ms
        # for this multi-tensor (foreach) update, which turned a 4-minute run into 6.
        callbacks.insert(0, WeightAveraging(multi_avg_fn=get_ema_multi_avg_fn(t.ema_decay), use_buffers=False))
    if stage == "fit":
        callbacks.append(ResumeState(run_dir, loaded.recipe.seed))
    if tracker is not None:
        callbacks.append(tracker)
    # selection.epoch: last selects nothing: last.ckpt, below, is the run's result.
    if stage == "fit" and loaded.recipe.selection.epoch == "best":
        callbacks.append(
            RelocatableModelCheckpoint(
                dirpath=run_dir / "checkpoints",
                filename="best-epoch{epoch}",
                auto_insert_metric_name=False,
                monitor=sel.monitor if sel else None,
                mode=sel.mode if sel else "min",
                save_top_k=1,
            )
        )
    if stage == "fit":
        # last.ckpt: every epoch. (ModelCheckpoint(save_last=True) only refreshes it when the top-k
        # checkpoint changed, so after an epoch without improvement it was not the last epoch.)
        callbacks.append(
            RelocatableModelCheckpoint(dirpath=run_dir / "checkpoints", filename="last", monitor=None, save_top_k=1, enable_version_counter=False)
        )
        # Mid-epoch last.ckpt: every trainer.checkpoint_every_n_steps steps, and on SIGTERM/SIGUSR1.
        callbacks.append(MidEpochCheckpoint(run_dir / "checkpoints" / "last.ckpt", t.checkpoint_every_n_steps, run_dir))
    if progress_lines.wanted(t.progress_every_s):
        callbacks.append(progress_lines.ProgressLines(t.progress_every_s, expected_rate(loaded, t)))
    precision, note = stage_precision(t, stage)
    if note:
        # Once, not once per DDP rank: a launched rank knows its rank from the environment already.
        rank_zero_only(print)(note, flush=True)
    try:
        return _make_trainer(t, run_dir, callbacks, logger, AtomicCheckpointIO(), precision)
    except (MisconfigurationException, ValueError) as exc:
        # Lightning rejects a trainer setting the recipe schema let through (devices, strategy, ...).
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{loaded.path}: trainer: {first}") from exc


class ReleaseFreedMemory(pl.Callback):
    """Returns what the run freed to the system where it frees most: the setup's reading and
    tokenizing (at the start of training), an evaluation's activations and a checkpoint's
    serialisation (at the end of each; see :mod:`negtrain.core.memory`)."""

    def on_fit_start(self, trainer, pl_module) -> None:
        release_freed_memory()

    def on_validation_end(self, trainer, pl_module) -> None:
        release_freed_memory()

    def on_test_end(self, trainer, pl_module) -> None:
        release_freed_memory()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        release_freed_memory()


def _make_trainer(t, run_dir: Path, callbacks: list, logger, checkpoint_io, precision: str) -> pl.Trainer:
    return pl.Trainer(
        default_root_dir=run_dir,
        plugins=[checkpoint_io],
        max_epochs=t.max_epochs,
        max_steps=t.max_steps,
        accumulate_grad_batches=t.accumulate_grad_batches,
        gradient_clip_val=t.gradient_clip_val,
        precision=precision,  # type: ignore[arg-type]  # one of Lightning's names (trainer_precision/evaluation_precision)
        accelerator=t.accelerator,
        devices=t.devices,
        strategy=t.strategy,
        num_nodes=t.num_nodes,
        # Limits are applied by our batch samplers, in the batches one device would take, so they
        # mean the same examples on any number of ranks (Lightning's would be per rank). Lightning
        # keeps only the 0 that switches a loop off.
        limit_train_batches=_off_or_all(t.limit_train_batches),
        limit_val_batches=_off_or_all(t.limit_val_batches),
        limit_test_batches=_off_or_all(t.limit_val_batches),
        log_every_n_steps=t.log_every_n_steps,
        deterministic=t.deterministic,
        # One progress display: the progress line, in a terminal as in a log (progress_lines);
        # Lightning's bar only where the line is off (progress_every_s: 0).
        enable_progress_bar=t.enable_progress_bar and not progress_lines.wanted(t.progress_every_s),
        callbacks=callbacks,
        logger=logger if logger is not None else False,
        num_sanity_val_steps=0,
        # Our batch sampler shards over ranks itself (with length bucketing), so Lightning must
        # not wrap it in a DistributedSampler.
        use_distributed_sampler=False,
        enable_model_summary=False,
    )


def _off_or_all(limit: int | float) -> int | float:
    return 0 if limit == 0 else 1.0


def fit(loaded: LoadedRecipe, output_dir: Path | None = None, command: list[str] | None = None, resume_from: Path | None = None, resuming: bool = False) -> Path:
    """Train; ``command`` (the argv that started it) is recorded in ``command.txt`` for model cards.

    ``resuming``: continue the run in ``output_dir`` (see :mod:`negtrain.training.resume`), from
    the checkpoint ``resume_from`` (None: from the start).

    The run directory is locked (:mod:`negtrain.io.run_lock`) before anything is built, so a second
    ``fit`` into it is refused at once, and stays locked until the run ends.
    """
    if not resuming:  # a resumed run was checked before it was rewound (resume)
        check_recipe_selection(loaded.recipe, str(loaded.path))
        check_training(loaded.recipe, str(loaded.path))
    output_dir = output_dir or default_run_dir(loaded.name)
    with run_lock(output_dir):
        try:
            return _fit(loaded, output_dir, command, resume_from, resuming)
        except Stopped as stopped:
            if stopped.printed or not (output_dir / "recipe.yaml").is_file():
                raise  # said already (a checkpoint was written), or nothing to continue
            raise stopped.continue_with(f"{output_dir} keeps its newest checkpoint", resume_command(output_dir)) from stopped


def _fit(loaded: LoadedRecipe, output_dir: Path, command: list[str] | None, resume_from: Path | None, resuming: bool) -> Path:
    pl.seed_everything(loaded.recipe.seed, workers=True, verbose=False)
    loaded, built = _build(loaded, "fit")
    built.selection = fit_selection(loaded, built)
    if not resuming:
        _check_new_run_dir(output_dir)
    if resume_from is not None:  # before anything is written into the run
        check_checkpoint_fits(built.module, Path(resume_from), output_dir)
    record = _provenance(loaded, built)
    # A resumed W&B run keeps the config it started with (its provenance included).
    logger = tracking.make_logger(loaded.recipe, output_dir, resuming=resuming, provenance=None if resuming else record)
    # The Trainer first: a setting Lightning rejects must not leave a run directory behind.
    trainer = _trainer(loaded, built, output_dir, "fit", logger=logger)
    run_dir = output_dir if resuming else _prepare_run_dir(loaded, output_dir)
    _write_provenance(run_dir, record, resuming)
    if command and not resuming:
        write_text(run_dir / "command.txt", redact_text(shlex.join(command)) + "\n")
    if trainer.is_global_zero:  # where to look while it runs, said before it does
        print(f"run directory: {run_dir}" + (" (resumed)" if resuming else ""), flush=True)
    if not (resuming and (run_dir / "model" / "config.json").is_file()):
        with atomic_dir(run_dir / "model", replace=True) as tmp:
            built.tokenizer.save_pretrained(tmp)
            if built.module.model is not None:
                built.module.model.config.save_pretrained(tmp)
                save_adapter_config(built.module.model, tmp)  # LoRA runs: what `export` needs
    try:
        trainer.fit(built.module, datamodule=built.data, ckpt_path=resume_from, weights_only=True)
    except SIGTERMException:
        # Lightning's own SIGTERM exit (a SystemExit with code 0), before our handler took over.
        raise Stopped(signal.SIGTERM, f"stopped by SIGTERM while starting; continue with: {resume_command(run_dir)}") from None
    finally:
        tracking.finish(logger, trainer, built.selection, run_dir)
    if trainer.is_global_zero:
        sel = built.selection
        best = getattr(trainer.checkpoint_callback, "best_model_path", "")  # a ModelCheckpoint's; none: ""
        if loaded.recipe.selection.epoch == "last":
            print(f"kept the last epoch (selection.epoch: last, no selection): {run_dir / 'checkpoints' / 'last.ckpt'}")
        elif sel and best:
            score = best_score(trainer.checkpoint_callback)
            if score is not None:
                print(f"best {sel.monitor} = {score:.4f}: {best}")
                if trainer.current_epoch > 1:  # a choice among several epochs, on a reported split
                    print("\n".join(wrapped(selection_bias_note(sel.monitor, trainer.current_epoch), table_width(), indent="  ")))
            else:
                print(f"best {sel.monitor}: NaN in every epoch, so no epoch was better than another; kept {best}")
            if sel.on_test:
                print("\n".join(wrapped(f"warning: {selected_on_test_note(sel.monitor, sel.why, loaded.recipe.selection.allow_test_split)}", table_width(), indent="  ")))
        for source, reported in trained_test_rows(loaded.recipe):
            print("\n".join(wrapped(f"warning: {trained_on_test_note(source, reported)}", table_width(), indent="  ")))
        print(f"run directory: {run_dir}")
    return run_dir


def resume(run_dir: Path) -> Path:
    """``fit --resume``: continue ``run_dir`` from its newest complete checkpoint (see
    :mod:`negtrain.training.resume`), or say that it is already complete."""
    check_run_dir(run_dir)  # what is wrong with it, before the lock would create or write anything
    check_resumed_recipe(run_dir)
    with run_lock(run_dir):
        plan = plan_resume(run_dir)
        if plan is None:
            return Path(run_dir)
        return fit(plan.loaded, plan.run_dir, resume_from=plan.checkpoint, resuming=True)


def evaluate(loaded: LoadedRecipe, stage: str, checkpoint: Path | None, output_dir: Path | None, write_recipe: bool = False) -> Path:
    """``validate`` / ``test``: score a checkpoint (or the recipe's starting model) on its benchmarks.

    ``write_recipe``: also write the resolved recipe.yaml into the output directory (report cards).
    ``provenance.json`` is written beside it (into a folder that has none)."""
    if checkpoint is not None and not checkpoint.is_file():
        raise ConfigError(f"--checkpoint {checkpoint}: no such file")
    if loaded.recipe.trainer.limit_val_batches == 0:  # fit's "no evaluation"; here it would score nothing and print None
        raise ConfigError(f"trainer.limit_val_batches=0: `{stage}` would score no example; give a number of batches "
                          "(or a fraction) above 0, or drop it to score every example")
    check_recipe_selection(loaded.recipe, str(loaded.path))  # the run's selection, against what this stage reports too
    pl.seed_everything(loaded.recipe.seed, workers=True, verbose=False)
    loaded, built = _build(loaded, stage)
    if not built.data.eval_sets:
        raise ConfigError(f"{loaded.path}: the recipe lists no benchmarks for `{stage}` (data.eval / data.test)")
    if checkpoint is not None:
        reload_weights(built.module, str(checkpoint))
    record = _provenance(loaded, built, checkpoint, stage)
    run_dir = output_dir or default_run_dir(loaded.name).with_name(default_run_dir(loaded.name).name + f"-{stage}")
    trainer = _trainer(loaded, built, run_dir, stage)
    with run_lock(run_dir):
        if write_recipe and trainer.is_global_zero:
            write_text(run_dir / "recipe.yaml", resolved_recipe_yaml(loaded))
        if write_recipe or not (run_dir / provenance.FILE_NAME).exists():  # never over a fit's own
            _write_provenance(run_dir, record, resuming=False)
        run = trainer.validate if stage == "validate" else trainer.test
        # verbose=False: Lightning's own table prints once per dataloader, unrounded and with NaN
        # rows; RunRecorder prints ours, once.
        run(built.module, datamodule=built.data, verbose=False)
    if trainer.is_global_zero:
        if checkpoint is None and built.fresh_head:
            print("\n".join(wrapped(zero_shot_note(built.fresh_head), table_width(), indent="")), flush=True)
        print(f"run directory: {run_dir}")
    return run_dir


#: How to score trained weights instead, where the command takes a checkpoint (validate, test).
WITH_CHECKPOINT = "score a trained checkpoint with --checkpoint, or start from a model with a trained head"


def evaluate_each(
    loaded: LoadedRecipe, checkpoint: Path | None, staging: Callable[[str], Path], done: Callable[[str, Path, list[RunRecord]], None],
    provenance_of: LoadedRecipe | None = None, provenance_dir: Path | None = None,
    checkpoint_given_as: str = "--checkpoint", fresh_head_remedy: str = WITH_CHECKPOINT, plan: EvalPlan | None = None,
) -> str | None:
    """Score the recipe's eval sets one at a time with one loaded model, for a report card that
    survives a kill: set ``name`` is recorded into the fresh folder ``staging(name)`` (its
    metrics line and predictions file, as :func:`evaluate` writes them), and ``done(name, folder,
    records)`` is called on rank zero as soon as that set is finished, before the next one starts,
    with the records the recorder wrote for it (handed on, so nothing reads the file back). A
    SIGTERM stops it with :class:`Stopped` (never a success); what ``done`` kept stays.
    ``provenance.json`` of ``provenance_of`` (the whole card's recipe) goes into ``provenance_dir``;
    a continued card adds this session to the one it has. (A classifier or masked LM keeps no
    answers; a language model's card answers through the engine, with its response cache.)
    ``checkpoint_given_as``: how the user named the checkpoint, for errors (a card's ``--model RUN``).
    ``plan``: the recipe as the caller resolved it (resolved here when not given).
    Returns the note printed when part of the model's head is fresh (its numbers are chance level),
    whose advice is ``fresh_head_remedy``, or None."""
    if checkpoint is not None and not checkpoint.is_file():
        raise ConfigError(f"{checkpoint_given_as} {checkpoint}: no such file")
    pl.seed_everything(loaded.recipe.seed, workers=True, verbose=False)
    loaded, built = _build(loaded, "validate", plan)
    if checkpoint is not None:
        reload_weights(built.module, str(checkpoint), checkpoint_given_as)
    if provenance_dir is not None:
        record = _provenance(provenance_of or loaded, built, checkpoint, "validate")
        _write_provenance(provenance_dir, record, resuming=(provenance_dir / provenance.FILE_NAME).exists())
    sets = list(built.module.eval_sets)
    trainer = _trainer(loaded, built, staging(sets[0].name), "validate")
    recorder = next(c for c in trainer.callbacks if isinstance(c, RunRecorder))  # type: ignore[attr-defined]  # set by Lightning's callback connector
    recorded: list[RunRecord] = []  # what the recorder wrote for the current set, handed to ``done``
    recorder.listeners.append(recorded.append)
    for eval_set in sets:
        folder = staging(eval_set.name)
        recorder.run_dir = folder
        recorded.clear()
        # One set per validate call: the module and the data module iterate over these lists.
        built.module.eval_sets = [eval_set]
        built.data.eval_sets = [eval_set]
        try:
            trainer.validate(built.module, datamodule=built.data, verbose=False)
        except SIGTERMException:
            raise Stopped(signal.SIGTERM, "stopped by SIGTERM") from None
        if trainer.is_global_zero:
            done(eval_set.name, folder, list(recorded))
        if trainer.received_sigterm:  # during the set's last batch: the set is complete and kept
            raise Stopped(signal.SIGTERM, "stopped by SIGTERM")
    if checkpoint is None and built.fresh_head:
        note = zero_shot_note(built.fresh_head, fresh_head_remedy)
        if trainer.is_global_zero:
            print("\n".join(wrapped(note, table_width(), indent="")), flush=True)
        return note
    return None


def zero_shot_note(fresh: list[str], remedy: str = WITH_CHECKPOINT) -> str:
    """What a score of the starting model means when part of its head was never trained, and
    ``remedy``: what to run instead, in the words of the command that printed it."""
    shown = ", ".join(fresh[:4]) + (f" and {len(fresh) - 4} more" if len(fresh) > 4 else "")
    return (
        f"note: the starting model's {shown} {'is' if len(fresh) == 1 else 'are'} freshly initialised (random), so these "
        f"numbers are chance level, not what the model can do zero-shot; {remedy}"
    )


def score_in_process(loaded: LoadedRecipe, checkpoint: Path | None, staging: Callable[[str], Path],
                     done: Callable[[str, Path, list[RunRecord]], None], **settings: Any) -> str | None:
    """A report card's ``hf`` backend: :func:`evaluate_each`, third-party logs quieted (handed to evaluation/ by ``evaluate``)."""
    quiet_training_logs()
    return evaluate_each(loaded, checkpoint, staging, done, **settings)


def expected_rate(loaded: LoadedRecipe, t) -> tuple[float, str] | None:
    """The training speed the recipe's header states, when it is for this kind of machine (a GPU
    run is not compared with a CPU measurement, nor the other way round)."""
    try:
        needs = recipe_needs(loaded.path)
        if needs is None:  # a run's own recipe.yaml (fit --resume) has no header: its recipe's has
            from negtrain.recipes import available_recipes

            recorded = re.match(r"# recipe: (\S+)", loaded.path.read_text(encoding="utf-8"))  # the line a run's recipe.yaml starts with
            shipped = available_recipes().get(recorded.group(1) if recorded else loaded.name)
            needs = recipe_needs(shipped) if shipped is not None else None
    except (OSError, NegtrainError):
        return None
    if needs is None or needs.rate is None:
        return None
    kind = "GPU" if torch.cuda.is_available() and t.accelerator in ("auto", "gpu", "cuda") else "CPU"
    return (needs.rate, kind) if kind == needs.kind else None


