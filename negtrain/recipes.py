"""Finding recipes and applying command-line overrides to them."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from negtrain.config import SHORTHAND_SECTIONS, Recipe, is_text_field, load_yaml, parse_yaml, to_dict, validate_recipe
from negtrain.core.errors import ConfigError, unknown_name


def recipes_dir() -> Path:
    """The recipe folder: ``NEGTRAIN_RECIPES_DIR``; else ``recipes/`` of the source checkout this
    package sits in; else the recipes installed with the package (the wheel ships the top-level
    ``recipes/`` as ``negtrain/recipe_files/``)."""
    env = os.environ.get("NEGTRAIN_RECIPES_DIR")
    if env:
        return Path(env)
    package = Path(__file__).resolve().parent
    checkout = package.parent / "recipes"
    if checkout.is_dir() and (package.parent / "pyproject.toml").is_file():
        return checkout
    return package / "recipe_files"


def available_recipes() -> dict[str, Path]:
    folder = recipes_dir()
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def find_recipe(name_or_path: str) -> tuple[str, Path]:
    """Resolve a recipe name (a file in recipes/) or a path to a YAML file."""
    path = Path(name_or_path)
    known = available_recipes()
    # A bare recipe name is the shipped recipe even where a folder of that name sits in the working
    # directory (a run's output folder is often named after its recipe): a folder is never a recipe.
    bare = path.suffix == "" and len(path.parts) == 1 and name_or_path in known
    if bare and path.is_dir():
        return name_or_path, known[name_or_path]
    if path.suffix in {".yaml", ".yml"} or path.exists():
        if path.exists() and not path.is_file():
            hint = f"; its recipe is {path / 'recipe.yaml'}" if (path / "recipe.yaml").is_file() else ""
            raise ConfigError(f"--recipe {path}: not a regular file (a directory or a device){hint}")
        if not path.is_file():
            raise ConfigError(f"recipe file not found: {path}")
        return path.stem, path
    if name_or_path not in known:
        raise unknown_name("recipe", name_or_path, known)
    return name_or_path, known[name_or_path]


#: What YAML reads as null: the one way to unset an optional string field from the command line.
NULL_WORDS = {"null", "Null", "NULL", "~"}


def override_pairs(args: list[str]) -> list[tuple[str, str]]:
    """``["--a.b=1", "--c", "x"]`` -> ``[("a.b", "1"), ("c", "x")]``: the keys and unparsed values."""
    pairs = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or len(arg) == 2:
            raise ConfigError(f"unexpected argument '{arg}': overrides look like --section.key=value")
        key, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                raise ConfigError(f"override --{key} needs a value: --{key}=VALUE")
            value = args[i + 1]
            i += 1
        pairs.append((key, value))
        i += 1
    return pairs


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """``["--trainer.max_epochs=1", "--model.learning_rate", "3e-5"]`` -> ``{"trainer.max_epochs": 1, ...}``.

    Values are parsed as YAML scalars, so numbers, booleans and lists keep their types; a string
    field's value is taken verbatim (``null`` still unsets an optional one). Both the
    ``--key=value`` form (what a W&B sweep agent passes) and ``--key value`` are accepted. A key
    given twice is an error, as a key written twice in a recipe is: which one would win is a guess.
    """
    overrides: dict[str, Any] = {}
    for key, value in override_pairs(args):
        if key in overrides:
            raise ConfigError(f"override --{key} is given twice; give it once")
        if is_text_field(key) and value not in NULL_WORDS:
            overrides[key] = value
        else:
            try:
                overrides[key] = parse_yaml(value) if value != "" else ""
            except yaml.composer.ComposerError as exc:  # too deep, an alias bomb: not a plain string either
                raise ConfigError(f"override --{key}: {exc.problem}") from exc
            except yaml.YAMLError:
                overrides[key] = value
    return overrides


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys in a copy of the raw recipe mapping. Unknown keys are caught on validation."""
    result = copy.deepcopy(raw)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        node = result
        for j, part in enumerate(parts[:-1]):
            child = node.get(part) if isinstance(node, dict) else None
            if j == 0 and isinstance(child, str) and part in SHORTHAND_SECTIONS:
                child = node[part] = {SHORTHAND_SECTIONS[part]: child}  # `logger: none` + --logger.project=x
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"override --{dotted}: '{'.'.join(parts[: j + 1])}' is not a section")
            node = child
        node[parts[-1]] = value
    return result


@dataclass(frozen=True)
class LoadedRecipe:
    name: str
    path: Path
    recipe: Recipe


def resolved_recipe_yaml(loaded: LoadedRecipe) -> str:
    """A run's ``recipe.yaml``, which ``fit --resume`` and ``evaluate --run`` read back."""
    return f"# recipe: {loaded.name} (resolved from {loaded.path.name})\n" + yaml.safe_dump(to_dict(loaded.recipe), sort_keys=False)


def load_recipe(name_or_path: str, overrides: dict[str, Any] | None = None) -> LoadedRecipe:
    name, path = find_recipe(name_or_path)
    raw = load_yaml(path)
    if raw is None:
        raise ConfigError(f"{path}: the recipe file is empty")
    if overrides:
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: a recipe must be a YAML mapping")
        raw = apply_overrides(raw, overrides)
    where = str(path) + (" (with overrides)" if overrides else "")
    return LoadedRecipe(name=name, path=path, recipe=validate_recipe(raw, where))


def first_comment_line(path: Path) -> str:
    """The recipe's purpose: the first sentence of its header, over as many comment lines as it
    takes (up to the ``# Needs:`` line or a blank comment line), never cut mid-sentence."""
    parts: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        text = line.lstrip("#").strip()
        if not text:
            if parts:
                break
            continue
        if text.startswith("Needs:"):
            break
        parts.append(text)
        if text.endswith((".", "!", "?")):
            break
    return " ".join(parts)


@dataclass(frozen=True)
class Needs:
    """What a recipe needs, from its header's ``# Needs: <network> | <device> | <time>`` line.

    Kept as data in each recipe: ``network`` is ``offline`` or ``Hub`` (the model or data come
    from the Hugging Face Hub), ``device`` what it runs on, ``time`` how long a run takes on a
    2-core CPU, measured, or why it was not.
    """

    network: str
    device: str
    time: str

    @property
    def rate(self) -> float | None:
        """The training speed the header states (``... (about 102 training examples/s) ...`` in its time, the
        first one: the machine it was measured on), or None when it states none."""
        import re

        found = re.search(r"([\d.]+) (?:training )?examples/s", self.time)
        return float(found.group(1)) if found else None

    @property
    def kind(self) -> str:
        """The kind of machine the time and rate are for: ``GPU`` or ``CPU``."""
        return "GPU" if "GPU" in self.device.upper() else "CPU"


NEEDS_PREFIX = "# Needs:"


def recipe_needs(path: Path) -> Needs | None:
    """The recipe's ``# Needs:`` header line, parsed; None when the header has none."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(NEEDS_PREFIX):
            parts = [p.strip() for p in line[len(NEEDS_PREFIX) :].split("|")]
            if len(parts) != 3 or not all(parts):
                raise ConfigError(f"{path}: '{line.strip()}' should read '# Needs: <offline|Hub> | <device> | <time on a 2-core CPU>'")
            return Needs(*parts)
    return None
