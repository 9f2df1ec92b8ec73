"""``fit``, ``validate`` and ``test``: run a recipe, with dotted overrides on any field."""

from __future__ import annotations

import argparse
from pathlib import Path


def _recipe_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--recipe", required=required, help="a recipe name (see `negtrain recipes`) or a path to a YAML file")
    p.add_argument("--output-dir", type=Path, default=None, help="run directory (default: checkpoints/<recipe>/<timestamp>)")


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    _recipe_args(p, required=False)
    p.add_argument(
        "--resume", type=Path, default=None, metavar="RUN_DIR",
        help="continue a killed run from its newest complete checkpoint, with the run's own recipe.yaml",
    )
    p.add_argument(
        "--seeds", default=None, metavar="N,N,...",
        help="train the recipe once per seed, in sequence, each run in <output-dir>/seed<N>; "
        "`report --run <output-dir>` then gives the mean and std across seeds",
    )


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    _recipe_args(p)
    p.add_argument("--checkpoint", type=Path, default=None, help="a Lightning checkpoint from a run (default: the recipe's starting model)")


def _loaded(args: argparse.Namespace, extra: list[str]):
    """The validated recipe. It is read before torch, Lightning and transformers are imported (by
    ``negtrain.training``), so a mistake in it is reported in a fraction of a second."""
    from negtrain.core.paths import check_output_dir
    from negtrain.recipes import load_recipe, parse_overrides

    loaded = load_recipe(args.recipe, parse_overrides(extra))
    if args.output_dir is not None:
        check_output_dir(args.output_dir)  # before the model is built, not after
    check_benchmarks(loaded)
    from negtrain.core.third_party_logs import quiet_training_logs

    quiet_training_logs()
    return loaded


def check_benchmarks(loaded) -> None:
    """Every benchmark and split the recipe names exists (the registry imports no torch)."""
    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.core.errors import ConfigError

    data = loaded.recipe.data
    for section, specs in (("data.train", data.train), ("data.eval", data.eval), ("data.test", data.test or [])):
        if isinstance(specs, str):  # "all": resolved (and checked) by the scoring matrix when data loads
            continue
        for spec in specs:
            try:
                get_benchmark(spec.benchmark).check_split(spec.split)
            except ConfigError as exc:
                raise ConfigError(f"{loaded.path}: {section}: {exc}") from exc


def run_fit(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.errors import NegtrainError

    if args.resume is not None:
        if args.seeds is not None:
            raise NegtrainError("fit --resume continues one run; resume a seed run with fit --resume <parent>/seed<N>")
        if args.recipe is not None or args.output_dir is not None or extra:
            given = " ".join([*(["--recipe"] if args.recipe else []), *(["--output-dir"] if args.output_dir else []), *extra])
            raise NegtrainError(f"fit --resume takes the run's own recipe.yaml and directory; drop {given}")
        from negtrain.core.third_party_logs import quiet_training_logs
        from negtrain.training.run import resume

        quiet_training_logs()
        resume(args.resume)
        return 0
    if args.recipe is None:
        raise NegtrainError("fit needs --recipe NAME_OR_PATH (or --resume RUN_DIR)")
    argv = getattr(args, "argv", None)
    loaded = _loaded(args, extra)  # recipe mistakes are answered before torch is imported
    from negtrain.benchmarks.test_rows import check_recipe_selection, check_training
    from negtrain.recipes import parse_overrides

    # No epoch picked, and no row trained on, on test rows unless allowed: said before torch loads.
    check_recipe_selection(loaded.recipe, str(loaded.path))
    check_training(loaded.recipe, str(loaded.path))

    overrides = parse_overrides(extra)
    # The recipe's own seeds (a paper's average over seeds) unless one seed or others are asked for.
    default_seeds = loaded.recipe.seeds if "seed" not in overrides else None
    if args.seeds is not None or default_seeds:
        from negtrain.runs.seeds import fit_seeds, parse_seeds

        seeds = parse_seeds(args.seeds) if args.seeds is not None else list(default_seeds or ())  # set when there is no --seeds
        fit_seeds(args.recipe, overrides, seeds, args.output_dir, argv)
        return 0
    from negtrain.training.run import fit

    fit(loaded, args.output_dir, command=["python", "-m", "negtrain", *argv] if argv else None)
    return 0


def run_eval(args: argparse.Namespace, extra: list[str]) -> int:
    loaded = _loaded(args, extra)
    from negtrain.training.run import evaluate

    evaluate(loaded, args.command, args.checkpoint, args.output_dir)
    return 0
