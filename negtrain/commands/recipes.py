"""``recipes``: list every recipe with its one-line purpose."""

from __future__ import annotations

import argparse

from negtrain.errors import NegtrainError


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.recipes import available_recipes, first_comment_line

    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    recipes = available_recipes()
    width = max((len(n) for n in recipes), default=0)
    for name, path in recipes.items():
        print(f"{name:<{width}}  {first_comment_line(path)}")
    return 0
