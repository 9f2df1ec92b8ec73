"""``recipes``: list every recipe with its purpose and what it needs (network, device, time)."""

from __future__ import annotations

import argparse
import shutil
import textwrap

from negtrain.core.errors import NegtrainError


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.plugins import plugin_lines
    from negtrain.recipes import available_recipes, first_comment_line, recipe_needs

    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    recipes = available_recipes()
    width = max((len(n) for n in recipes), default=0)
    columns = max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))
    for name, path in recipes.items():
        print(f"{name:<{width}}  {first_comment_line(path)}")
        needs = recipe_needs(path)
        shown = f"{needs.network}, {needs.device}; 2-core CPU: {needs.time}" if needs else "(the recipe does not say what it needs)"
        indent = " " * (width + 2)
        print("\n".join(textwrap.wrap(f"needs: {shown}", width=columns, initial_indent=indent,
                                      subsequent_indent=indent + "  ", break_on_hyphens=False)))
    plugins = plugin_lines()  # what installed plugins add to the tables a recipe names (none: nothing printed)
    if plugins:
        print("\n" + "\n".join(plugins))
    return 0
