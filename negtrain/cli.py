"""``python -m negtrain``: fit, validate, test and list recipes.

Malformed input exits with code 2 and one ``error: ...`` line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from negtrain.errors import NegtrainError


def _recipe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recipe", required=True, help="a recipe name (see `negtrain recipes`) or a path to a YAML file")
    p.add_argument("--output-dir", type=Path, default=None, help="run directory (default: checkpoints/<recipe>/<timestamp>)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="negtrain",
        description="Train and evaluate negation-robust language models.",
        epilog="Any recipe field can be overridden as --section.key=value, e.g. --trainer.max_epochs=1.",
    )
    top.add_argument("--debug", action="store_true", help="show tracebacks for input errors")
    sub = top.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit", help="train a recipe, evaluating its benchmarks every epoch")
    _recipe_args(fit)
    for name in ("validate", "test"):
        p = sub.add_parser(name, help=f"{name} a checkpoint (or the recipe's starting model) on the recipe's benchmarks")
        _recipe_args(p)
        p.add_argument("--checkpoint", type=Path, default=None, help="a Lightning checkpoint from a run")
    sub.add_parser("recipes", help="list the recipes with their purpose")
    return top


def _cmd_recipes() -> int:
    from negtrain.recipes import available_recipes, first_comment_line

    recipes = available_recipes()
    width = max((len(n) for n in recipes), default=0)
    for name, path in recipes.items():
        print(f"{name:<{width}}  {first_comment_line(path)}")
    return 0


def run(argv: list[str]) -> int:
    args, extra = parser().parse_known_args(argv)
    if args.command == "recipes":
        if extra:
            raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
        return _cmd_recipes()
    from negtrain.recipes import load_recipe, parse_overrides

    loaded = load_recipe(args.recipe, parse_overrides(extra))
    from negtrain.training import run as runner

    runner.quiet_third_party_logs()
    if args.command == "fit":
        runner.fit(loaded, args.output_dir)
    else:
        runner.evaluate(loaded, args.command, args.checkpoint, args.output_dir)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        return run(argv)
    except NegtrainError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
