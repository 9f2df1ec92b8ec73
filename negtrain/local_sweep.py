"""``negtrain sweep --local N``: a recipe's sweep run here, trial after trial, without W&B.

The search space is the recipe's ``sweep:`` section, the same one :func:`negtrain.sweeps.sweep_config`
turns into a W&B sweep (and validated the same way before any trial starts). Trials are drawn
deterministically from a seed (the recipe's, unless given):

- ``grid``: the Cartesian product of every parameter's ``values``, in order; the first N;
- ``random``: each parameter drawn from its distribution (W&B's names and defaults);
- ``bayes``: needs W&B's model of earlier trials, so it is drawn like ``random`` (and says so).

Each trial is a ``fit`` of the recipe with the command-line overrides first and the trial's
parameters after them (as a W&B agent appends ``${args}``), in ``<parent>/trial-<k>/``. A trial that
fails is recorded as failed and the sweep goes on. At the end a leaderboard ranks the trials by the
best epoch's value of the sweep metric (its direction from the metric's declaration) and is printed
and written as ``leaderboard.md`` and ``leaderboard.json`` in the parent directory.

W&B agents stay the way to run a sweep on many machines: ``negtrain sweep`` without ``--local``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import shlex
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from negtrain.config import SweepConfig, SweepParameter
from negtrain.errors import ConfigError, NegtrainError
from negtrain.io.atomic import write_text
from negtrain.recipes import LoadedRecipe, load_recipe
from negtrain.runs import RunDir
from negtrain.secrets import redact_text
from negtrain.sweeps import SweepMetric
from negtrain.training.run import fit


def _as_int_range(param: SweepParameter) -> bool:
    assert param.min is not None and param.max is not None
    return float(param.min).is_integer() and float(param.max).is_integer()


def draw(param: SweepParameter, rng: np.random.Generator) -> Any:
    """One value of ``param``, with W&B's distributions (mu 0, sigma 1 unless given)."""
    if param.value is not None:
        return param.value
    if param.values is not None:
        return param.values[int(rng.integers(len(param.values)))]
    dist = param.distribution or ("int_uniform" if _as_int_range(param) else "uniform")
    lo, hi = param.min, param.max
    mu = param.mu if param.mu is not None else 0.0
    sigma = param.sigma if param.sigma is not None else 1.0
    q = param.q or 1.0
    if dist == "int_uniform":
        return int(rng.integers(int(lo), int(hi) + 1))
    value = {
        "uniform": lambda: rng.uniform(lo, hi),
        "q_uniform": lambda: rng.uniform(lo, hi),
        "log_uniform_values": lambda: math.exp(rng.uniform(math.log(lo), math.log(hi))),
        "q_log_uniform_values": lambda: math.exp(rng.uniform(math.log(lo), math.log(hi))),
        "normal": lambda: rng.normal(mu, sigma),
        "q_normal": lambda: rng.normal(mu, sigma),
        "log_normal": lambda: math.exp(rng.normal(mu, sigma)),
        "q_log_normal": lambda: math.exp(rng.normal(mu, sigma)),
    }.get(dist)
    if value is None:
        raise ConfigError(f"sweep: distribution '{dist}' needs 'values' or 'value', not min/max")
    x = float(value())
    if dist.startswith("q_"):
        x = round(x / q) * q
    return float(f"{x:.6g}")  # a readable override, as precise as any learning rate needs


def sample_trials(sweep: SweepConfig, n: int, seed: int) -> list[dict[str, Any]]:
    """The parameters of N trials of ``sweep``, the same for the same seed."""
    if sweep.method == "grid":
        axes = []
        for key, param in sweep.parameters.items():
            if param.values is None and param.value is None:
                raise ConfigError(f"sweep.parameters.{key}: a grid sweep needs 'values' (or 'value'), not a range")
            axes.append([(key, v) for v in (param.values if param.values is not None else [param.value])])
        return [dict(combo) for combo in itertools.islice(itertools.product(*axes), n)]
    rng = np.random.default_rng(seed)
    return [{key: draw(param, rng) for key, param in sweep.parameters.items()} for _ in range(n)]


@dataclass
class Trial:
    trial: str
    params: dict[str, Any]
    run_dir: str
    status: str = "pending"  # "done" | "failed"
    best: float | None = None
    best_epoch: int | None = None
    last: float | None = None
    seconds: float | None = None
    error: str | None = None


def override_args(overrides: dict[str, Any]) -> list[str]:
    """``{"a.b": 1}`` -> ``["--a.b=1"]``, in the form the command line (and a W&B agent) uses."""
    def text(v: Any) -> str:
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            # YAML (1.1, as PyYAML reads overrides) takes 3e-05 for a string: write 3.0e-05.
            mantissa, e, exponent = repr(v).partition("e")
            return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else repr(v)
        return json.dumps(v) if isinstance(v, (list, dict)) else str(v)

    return [f"--{k}={text(v)}" for k, v in overrides.items()]


def score_trial(trial: Trial, metric: SweepMetric) -> None:
    """Fill in the trial's best (by the metric's direction) and last value of the sweep metric."""
    name, _, key = metric.name.partition("/")
    split, _, key = key.partition("/")
    series = [
        (ep.epoch, ep.evals.get(f"{name}/{split}", {}).get(key))
        for ep in RunDir(Path(trial.run_dir)).epochs
    ]
    series = [(e, v) for e, v in series if v is not None and math.isfinite(v)]
    if not series:
        return
    pick = max if metric.goal == "maximize" else min
    trial.best_epoch, trial.best = pick(series, key=lambda ev: ev[1])
    trial.last = series[-1][1]


def rank(trials: list[Trial], metric: SweepMetric) -> list[Trial]:
    """Scored trials best first (ties: the earlier trial), then the unscored in trial order."""
    scored = [t for t in trials if t.best is not None]
    sign = -1.0 if metric.goal == "maximize" else 1.0
    scored.sort(key=lambda t: sign * t.best)
    return scored + [t for t in trials if t.best is None]


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return str(value)


def leaderboard_markdown(recipe: str, metric: SweepMetric, method: str, seed: int, trials: list[Trial]) -> str:
    keys: list[str] = []
    for t in trials:
        keys += [k for k in t.params if k not in keys]
    split = "/".join(metric.name.split("/")[:2])
    lines = [
        f"# Local sweep: {recipe}",
        "",
        f"{len(trials)} trial(s), method {method}, seed {seed}; ranked by the best epoch's `{metric.name}` ({metric.goal}).",
        "",
        "| rank | trial | " + " | ".join(f"`{k}`" for k in keys) + " | best | epoch | last | status | seconds |",
        "|---:|---|" + "---|" * len(keys) + "---:|---:|---:|---|---:|",
    ]
    for i, t in enumerate(rank(trials, metric), 1):
        cells = [_fmt(t.params.get(k)) for k in keys]
        seconds = f"{t.seconds:.0f}" if t.seconds is not None else "-"
        status = t.status if t.status != "failed" else f"failed: {t.error}"
        lines.append(
            f"| {i if t.best is not None else '-'} | {t.trial} | " + " | ".join(cells)
            + f" | {_fmt(t.best)} | {_fmt(t.best_epoch)} | {_fmt(t.last)} | {status} | {seconds} |"
        )
    lines += [
        "",
        f"The winner's value is the best of {len(trials)} trials (each the best of its epochs) on {split}: "
        f"an optimistic figure unless {split} is kept out of what you report.",
    ]
    return "\n".join(lines) + "\n"


def default_parent(recipe_name: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("checkpoints") / "sweeps" / f"{recipe_name}-local-{stamp}"


def run_local_sweep(
    loaded: LoadedRecipe,
    recipe_arg: str,
    fixed_args: list[str],
    fixed_overrides: dict[str, Any],
    metric: SweepMetric,
    n: int,
    seed: int | None = None,
    parent: Path | None = None,
) -> Path:
    """Run ``n`` trials of the recipe's sweep one after another; returns the parent directory."""
    sweep = loaded.recipe.sweep
    assert sweep is not None
    seed = loaded.recipe.seed if seed is None else seed
    parent = parent or default_parent(loaded.name)
    if (parent / "leaderboard.json").exists():
        raise ConfigError(f"--output-dir {parent} already holds a sweep (leaderboard.json); choose another directory")
    if sweep.method == "bayes":
        print("sweep --local: method bayes needs W&B's model of earlier trials; drawing the trials at random instead", flush=True)
    params = sample_trials(sweep, n, seed)
    if len(params) < n:
        print(f"sweep --local: the grid has {len(params)} points; running {len(params)} trials, not {n}", flush=True)
    parent.mkdir(parents=True, exist_ok=True)
    extra = {} if metric.name == loaded.recipe.selection.metric else {"selection.metric": metric.name}
    width = len(str(len(params) - 1))
    trials = [Trial(f"trial-{k:0{width}d}", p, str(parent / f"trial-{k:0{width}d}")) for k, p in enumerate(params)]
    for k, trial in enumerate(trials, 1):
        overrides = {**fixed_overrides, **extra, **trial.params}
        shown = " ".join(override_args(trial.params))
        print(f"sweep --local: trial {k}/{len(trials)} ({trial.trial}): {shown}", flush=True)
        # Each key once (a swept key given on the command line too takes the trial's value).
        command = ["python", "-m", "negtrain", "fit", "--recipe", recipe_arg, *override_args(overrides), "--output-dir", trial.run_dir]
        start = time.perf_counter()
        try:
            fit(load_recipe(recipe_arg, overrides), Path(trial.run_dir), command=command)
            trial.status = "done"
            score_trial(trial, metric)
        except (NegtrainError, RuntimeError, ValueError, OSError) as exc:
            # One trial's failure (a diverged run, an out-of-memory) must not cost the others.
            trial.status = "failed"
            trial.error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            print(f"sweep --local: {trial.trial} failed: {trial.error}", flush=True)
        trial.seconds = round(time.perf_counter() - start, 1)
        print(f"sweep --local: {trial.trial}: best {metric.name} {_fmt(trial.best)} (epoch {_fmt(trial.best_epoch)})", flush=True)
    markdown = leaderboard_markdown(loaded.name, metric, sweep.method, seed, trials)
    board = {
        "recipe": loaded.name,
        "metric": asdict(metric),
        "method": sweep.method,
        "seed": seed,
        "command": shlex.join(["python", "-m", "negtrain", "sweep", "--recipe", recipe_arg, "--local", str(n), *fixed_args]),
        "trials": [asdict(t) for t in rank(trials, metric)],
    }
    write_text(parent / "leaderboard.json", redact_text(json.dumps(board, indent=1)) + "\n")
    write_text(parent / "leaderboard.md", redact_text(markdown))
    print(markdown, end="")
    print(f"leaderboard: {parent / 'leaderboard.md'} and leaderboard.json", flush=True)
    return parent
