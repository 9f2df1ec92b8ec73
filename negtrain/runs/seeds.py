"""Several seeds of one recipe: ``fit --seeds 1,2,3`` and the across-seed summary ``report`` gives.

A seed group is a parent directory holding one ordinary run directory per seed, ``seed<N>/``, and
``seeds.json`` (the recipe and the seeds). The runs are made one after another; each run's
resolved recipe is the recipe with ``seed: N`` and nothing else changed (with W&B on and no
``logger.group`` set, every seed gets the parent's name as its W&B group, the same for all).
A killed seed run is continued like any run, with ``fit --resume <parent>/seed<N>``, or with the
same ``fit --seeds`` command again, which keeps the finished seeds, continues the interrupted one
and starts the rest (SIGTERM or SIGINT print that command and exit 143 / 130). The parent is
locked for the group's life (:mod:`negtrain.io.run_lock`). ``report`` names every seed
``seeds.json`` lists but whose run recorded nothing, and every NaN it leaves out of a mean.

Across seeds, per eval set, metric and epoch, :func:`aggregate` gives the mean, the sample
standard deviation (n − 1) and each seed's value. The spread across seeds measures training
noise (initialisation, data order); a run's bootstrap interval measures the test set's sampling
noise. Both matter when comparing two recipes.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from negtrain.config import to_dict
from negtrain.core.errors import ConfigError, NegtrainError, Stopped
from negtrain.io.atomic import write_text
from negtrain.io.records import TRAIN
from negtrain.io.run_lock import run_lock
from negtrain.recipes import load_recipe
from negtrain.runs.reading import RunDir, is_count
from negtrain.core.secrets import redact_text

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
    """Train the recipe once per seed, in sequence, into ``<parent>/seed<N>``.

    The same command again continues the group: a finished seed is kept, an interrupted one
    continues from its newest checkpoint (``fit --resume``), the others start. A seed folder whose
    recipe is not this one (with its seed) is refused, and so is a parent that is a run itself."""
    # Training is imported here, where seeds are trained: reading a seed group (compare, report,
    # the results browser) imports no Lightning.
    from negtrain.training.run import default_run_dir, fit, resume

    if "seed" in overrides:
        raise ConfigError("fit: give either --seeds or --seed, not both")
    first = load_recipe(recipe, overrides)  # recipe mistakes surface before any directory is made
    parent = parent or default_run_dir(first.name)
    for name in ("metrics.jsonl", "recipe.yaml", "checkpoints"):
        if (parent / name).exists():
            raise ConfigError(
                f"--output-dir {parent} is a run directory ({name}), not the parent of seed runs; "
                "choose a new directory for fit --seeds"
            )
    extra: dict[str, Any] = {}
    if first.recipe.logger.backend == "wandb" and first.recipe.logger.group is None:
        extra["logger.group"] = parent.resolve().name  # the same for every seed: one W&B group
    given = ["python", "-m", "negtrain", *(argv or ["fit", "--recipe", recipe, "--seeds", ",".join(map(str, seeds))])]
    if "--output-dir" not in given and not any(a.startswith("--output-dir=") for a in given):
        given += ["--output-dir", str(parent)]
    continue_command = redact_text(shlex.join(given))
    with run_lock(parent):
        listed = _listed_seeds(parent, first.name)
        everything = listed + [s for s in seeds if s not in listed]
        manifest = {"recipe": first.name, "seeds": everything, "runs": [f"seed{s}" for s in everything]}
        write_text(parent / MANIFEST, json.dumps(manifest, indent=1) + "\n")
        for k, seed in enumerate(seeds):
            run_dir = parent / f"seed{seed}"
            loaded = load_recipe(recipe, {**overrides, **extra, "seed": seed})
            started = (run_dir / "recipe.yaml").is_file()
            print(f"seed {seed} ({k + 1} of {len(seeds)}){' continued' if started else ''}: {run_dir}", flush=True)
            try:
                if started:
                    _check_same_recipe(run_dir, loaded)
                    resume(run_dir)  # finished: nothing to do; killed: from its newest checkpoint
                else:
                    command = ["python", "-m", "negtrain", *seed_command(argv, seed)] if argv else None
                    fit(loaded, run_dir, command=command)
            except Stopped as stopped:
                raise stopped.continue_with(f"the seed runs in {parent} keep their finished seeds", continue_command) from stopped
    print(f"seed runs: {parent} (summarise with: negtrain report --run {parent})")
    return parent


def _listed_seeds(parent: Path, recipe_name: str) -> list[int]:
    """The seeds an earlier ``fit --seeds`` into ``parent`` listed (none for a new parent)."""
    path = parent / MANIFEST
    if not path.exists():
        return []
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        seeds = [int(s) for s in manifest["seeds"]]
        name = manifest.get("recipe")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NegtrainError(f"{path}: not a seed manifest ({type(exc).__name__}); move it aside or choose another --output-dir") from exc
    if name != recipe_name:
        raise ConfigError(f"--output-dir {parent} holds seed runs of recipe '{name}', not '{recipe_name}'; choose another directory")
    return seeds


def _check_same_recipe(run_dir: Path, loaded) -> None:
    """A seed folder continued by a rerun must hold this recipe with this seed, nothing else changed."""
    differ = _differing_keys([load_recipe(str(run_dir / "recipe.yaml")).recipe, loaded.recipe])
    if differ:
        shown = ", ".join(differ[:5]) + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
        raise ConfigError(
            f"{run_dir} was trained with another recipe (it differs in {shown}); rerun the command that made it, "
            "or choose another --output-dir"
        )


def is_seed_group(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


@dataclass
class SeedGroup:
    path: Path
    recipe_name: str
    seeds: list[int]
    runs: list[RunDir]  # in seed order
    #: seeds.json lists these, but their folder holds no recorded epoch: (seed, what is wrong)
    missing: list[tuple[int, str]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> SeedGroup:
        path = Path(path)
        try:
            manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
            seeds, names = list(manifest["seeds"]), list(manifest["runs"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise NegtrainError(f"{path / MANIFEST}: not a seed manifest ({exc})") from exc
        present = [(s, n) for s, n in zip(seeds, names, strict=False) if (path / n / "metrics.jsonl").is_file()]
        missing = [
            (s, f"{n}/ is missing" if not (path / n).is_dir() else f"{n}/ has recorded no epoch (not run yet, or stopped in its first epoch)")
            for s, n in zip(seeds, names, strict=False) if (s, n) not in present
        ]
        if not present:
            raise NegtrainError(f"--run {path}: no seed run has recorded an epoch yet ({'; '.join(w for _, w in missing)[:300]})")
        return cls(path, str(manifest.get("recipe", path.name)), [s for s, _ in present], [RunDir(path / n) for _, n in present], missing)

    @property
    def name(self) -> str:
        return self.path.resolve().name

    def recipe_differences(self) -> list[str]:
        """Dotted recipe keys, other than ``seed``, whose values differ between the seed runs, read
        from their recipe.yaml as written (resolved by fit): no family needs to be known to report."""
        return [k for k in _differing_flat([_flatten(run.recipe_data) for run in self.runs]) if k != "seed"]


def _differing_keys(recipes: list) -> list[str]:
    """Dotted recipe keys whose values are not the same in all ``recipes``, sorted."""
    return _differing_flat([_flatten(to_dict(recipe)) for recipe in recipes])


def _differing_flat(flat: list[dict[str, Any]]) -> list[str]:
    return [k for k in sorted(set().union(*flat)) if len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def _finite(value: Any) -> float | None:
    """A metric value, or None for one that is missing or not finite (NaN, ±inf)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    finite = [v for v in values if v is not None]
    if not finite:
        return None, None
    mean = sum(finite) / len(finite)
    if len(finite) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))


def _metrics_of(ep, name: str) -> dict[str, float | None]:
    """An epoch's metrics of the eval set ``name``, or its training line's (``train``)."""
    if name == TRAIN:
        return ep.train.metrics if ep.train else {}
    return ep.evals.get(name, {})


def aggregate(group: SeedGroup) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """eval set -> metric -> per epoch ``{"epoch", "mean", "std", "seeds": {seed: value}}``.

    ``std`` is the sample standard deviation over the seeds with a value (None with fewer than
    two); a seed without the epoch (a shorter or unfinished run) is left out of that epoch. A seed
    whose value is NaN (a diverged run) keeps its place with ``null`` and the row gets ``"note"``
    naming it, so it is never dropped from the mean unseen (and the JSON stays valid)."""
    names: list[str] = []
    epochs: set[int] = set()
    for run in group.runs:
        names += [n for n in run.eval_names if n not in names]
        epochs |= {ep.epoch for ep in run.epochs}
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name in [*names, TRAIN]:
        keys: list[str] = []
        for run in group.runs:
            for ep in run.epochs:
                source = _metrics_of(ep, name)
                keys += [k for k in source if k not in keys and not is_count(name, k)]
        for key in keys:
            rows = []
            for epoch in sorted(epochs):
                per_seed: dict[str, float | None] = {}
                for seed, run in zip(group.seeds, group.runs, strict=False):
                    at_epoch = next((e for e in run.epochs if e.epoch == epoch), None)
                    if at_epoch is None:
                        continue
                    source = _metrics_of(at_epoch, name)
                    if key in source:
                        per_seed[str(seed)] = _finite(source[key])
                if per_seed:
                    mean, std = _mean_std(list(per_seed.values()))
                    row: dict[str, Any] = {"epoch": epoch, "mean": mean, "std": std, "seeds": per_seed}
                    unscored = [s for s, v in per_seed.items() if v is None]
                    if unscored:
                        row["note"] = (f"seed{'s' if len(unscored) > 1 else ''} {', '.join(unscored)}: NaN (or no value), "
                                       f"left out of mean and std ({len(per_seed) - len(unscored)} of {len(per_seed)} seeds count)")
                    rows.append(row)
            out.setdefault(name, {})[key] = rows
    return out
