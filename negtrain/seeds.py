"""Several seeds of one recipe: ``fit --seeds 1,2,3`` and the across-seed summary ``report`` gives.

A seed group is a parent directory holding one ordinary run directory per seed, ``seed<N>/``, and
``seeds.json`` (the recipe and the seeds). The runs are made one after another; each run's
resolved recipe is the recipe with ``seed: N`` and nothing else changed (with W&B on and no
``logger.group`` set, every seed gets the parent's name as its W&B group, the same for all).
A killed seed run is continued like any run, with ``fit --resume <parent>/seed<N>``.

Across seeds, per eval set, metric and epoch, :func:`aggregate` gives the mean, the sample
standard deviation (n − 1) and each seed's value. The spread across seeds measures training
noise (initialisation, data order); a run's bootstrap interval measures the test set's sampling
noise. Both matter when comparing two recipes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negtrain.config import to_dict
from negtrain.errors import ConfigError, NegtrainError
from negtrain.io.atomic import write_text
from negtrain.recipes import load_recipe
from negtrain.runs import RunDir, is_count
from negtrain.training.run import default_run_dir, fit

MANIFEST = "seeds.json"


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> [1, 2, 3]; distinct integers in numpy's seed range."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--seeds: expected integers separated by commas (e.g. 1,2,3), got '{text}'") from None
    if not seeds:
        raise ConfigError("--seeds: give at least one seed, e.g. --seeds 1,2,3")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: '{text}' repeats a seed")
    bad = [s for s in seeds if not 0 <= s <= 2**32 - 1]
    if bad:
        raise ConfigError(f"--seeds: {bad[0]} is outside 0..2**32-1")
    return seeds


def seed_command(argv: list[str], seed: int) -> list[str]:
    """The command that makes one seed's run alone: ``--seeds`` replaced by ``--seed=N``."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--seeds":
            skip = True
            continue
        if arg.startswith("--seeds="):
            continue
        out.append(arg)
    return out + [f"--seed={seed}"]


def fit_seeds(recipe: str, overrides: dict[str, Any], seeds: list[int], parent: Path | None, argv: list[str] | None) -> Path:
    """Train the recipe once per seed, in sequence, into ``<parent>/seed<N>``."""
    if "seed" in overrides:
        raise ConfigError("fit: give either --seeds or --seed, not both")
    first = load_recipe(recipe, overrides)  # recipe mistakes surface before any directory is made
    parent = parent or default_run_dir(first.name)
    for seed in seeds:
        if (parent / f"seed{seed}" / "metrics.jsonl").exists():
            raise ConfigError(f"{parent / f'seed{seed}'} already holds a run; choose another --output-dir")
    extra: dict[str, Any] = {}
    if first.recipe.logger.backend == "wandb" and first.recipe.logger.group is None:
        extra["logger.group"] = parent.resolve().name  # the same for every seed: one W&B group
    parent.mkdir(parents=True, exist_ok=True)
    manifest = {"recipe": first.name, "seeds": seeds, "runs": [f"seed{s}" for s in seeds]}
    write_text(parent / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    for seed in seeds:
        print(f"seed {seed} ({seeds.index(seed) + 1} of {len(seeds)}): {parent / f'seed{seed}'}", flush=True)
        loaded = load_recipe(recipe, {**overrides, **extra, "seed": seed})
        command = ["python", "-m", "negtrain", *seed_command(argv, seed)] if argv else None
        fit(loaded, parent / f"seed{seed}", command=command)
    print(f"seed runs: {parent} (summarise with: negtrain report --run {parent})")
    return parent


def is_seed_group(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


@dataclass
class SeedGroup:
    path: Path
    recipe_name: str
    seeds: list[int]
    runs: list[RunDir]  # in seed order

    @classmethod
    def read(cls, path: Path) -> SeedGroup:
        path = Path(path)
        try:
            manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
            seeds, names = list(manifest["seeds"]), list(manifest["runs"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise NegtrainError(f"{path / MANIFEST}: not a seed manifest ({exc})") from None
        present = [(s, n) for s, n in zip(seeds, names) if (path / n / "metrics.jsonl").is_file()]
        if not present:
            raise NegtrainError(f"--run {path}: no seed run has recorded an epoch yet")
        return cls(path, str(manifest.get("recipe", path.name)), [s for s, _ in present], [RunDir(path / n) for _, n in present])

    @property
    def name(self) -> str:
        return self.path.resolve().name

    def recipe_differences(self) -> list[str]:
        """Dotted recipe keys, other than ``seed``, whose values differ between the seed runs."""
        flat = [_flatten(to_dict(run.recipe)) for run in self.runs]
        keys = sorted(set().union(*flat))
        return [k for k in keys if k != "seed" and len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None, None
    mean = sum(finite) / len(finite)
    if len(finite) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))


def aggregate(group: SeedGroup) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """eval set -> metric -> per epoch ``{"epoch", "mean", "std", "seeds": {seed: value}}``.

    ``std`` is the sample standard deviation over the seeds with a value (None with fewer than
    two); a seed without the epoch (a shorter or unfinished run) is left out of that epoch."""
    names: list[str] = []
    epochs: set[int] = set()
    for run in group.runs:
        names += [n for n in run.eval_names if n not in names]
        epochs |= {ep.epoch for ep in run.epochs}
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name in [*names, "train"]:
        keys: list[str] = []
        for run in group.runs:
            for ep in run.epochs:
                source = (ep.train or {}).get("metrics", {}) if name == "train" else ep.evals.get(name, {})
                keys += [k for k in source if k not in keys and not is_count(name, k)]
        for key in keys:
            rows = []
            for epoch in sorted(epochs):
                per_seed = {}
                for seed, run in zip(group.seeds, group.runs):
                    ep = next((e for e in run.epochs if e.epoch == epoch), None)
                    if ep is None:
                        continue
                    source = (ep.train or {}).get("metrics", {}) if name == "train" else ep.evals.get(name, {})
                    if key in source:
                        per_seed[str(seed)] = source[key]
                if per_seed:
                    mean, std = _mean_std(list(per_seed.values()))
                    rows.append({"epoch": epoch, "mean": mean, "std": std, "seeds": per_seed})
            out.setdefault(name, {})[key] = rows
    return out

