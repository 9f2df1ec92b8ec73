"""``negtrain sweep --local N``: a recipe's sweep run here, trial after trial, without W&B.

The search space is the recipe's ``sweep:`` section, the same one :func:`negtrain.runs.sweeps.sweep_config`
turns into a W&B sweep (and validated the same way before any trial starts). Trials are drawn
deterministically from a seed (the recipe's, unless given):

- ``grid``: the Cartesian product of every parameter's ``values``, in order; the first N;
- ``random``: each parameter drawn from its distribution (W&B's names and defaults), one trial at
  a time (N is at most :data:`MAX_LOCAL_TRIALS`);
- ``bayes``: needs W&B's model of earlier trials, so it is drawn like ``random`` (and says so).

Each trial is a ``fit`` of the recipe with the command-line overrides first and the trial's
parameters after them (as a W&B agent appends ``${args}``), in ``<parent>/trial-<k>/``. A trial that
fails, for whatever reason (a diverged run, a missing package), is recorded as failed and the sweep
goes on. After every trial, and at the end, a leaderboard ranks the trials by the best epoch's value
of the sweep metric (its direction from the metric's declaration); it is written as
``leaderboard.md`` and ``leaderboard.json`` in the parent directory and printed at the end.

A sweep resumes. ``sweep.json`` in the parent records its settings and each trial as it starts;
the same command again continues it: a finished trial is kept as it is (not trained again), an
interrupted one continues from its newest checkpoint (``fit --resume``), the rest start. A
different recipe, overrides, metric, method or seed in the same parent is refused. SIGTERM or
SIGINT during a trial stops the sweep with the leaderboard so far, the command that continues it
and exit code 143 / 130. The parent is locked for the sweep's life (:mod:`negtrain.io.run_lock`).

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
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from negtrain.config import SweepConfig, SweepParameter, is_test_split
from negtrain.core.errors import ConfigError, NegtrainError, Stopped
from negtrain.io.atomic import write_text
from negtrain.io.run_lock import run_lock
from negtrain.recipes import LoadedRecipe, load_recipe
from negtrain.runs.reading import RunDir
from negtrain.core.secrets import redact_text
from negtrain.runs.sweeps import MAX_LOCAL_TRIALS, SweepMetric
from negtrain.training.run import fit, resume


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
    # SweepParameter's validator: exactly one of values, value or min + max, so a range has both.
    assert param.min is not None and param.max is not None
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


def grid_size(sweep: SweepConfig) -> int:
    """How many points a grid sweep has (the product of its parameters' value counts)."""
    size = 1
    for key, param in sweep.parameters.items():
        if param.values is None and param.value is None:
            raise ConfigError(f"sweep.parameters.{key}: a grid sweep needs 'values' (or 'value'), not a range")
        size *= len(param.values) if param.values is not None else 1
    return size


def iter_trials(sweep: SweepConfig, seed: int) -> Iterator[dict[str, Any]]:
    """The parameters of the sweep's trials, drawn one at a time (a grid ends after its last point):
    a sweep of a billion trials starts its first at once."""
    if sweep.method == "grid":
        grid_size(sweep)  # its error, before any trial
        axes = [[(key, v) for v in (param.values if param.values is not None else [param.value])]
                for key, param in sweep.parameters.items()]
        for combo in itertools.product(*axes):
            yield dict(combo)
        return
    rng = np.random.default_rng(seed)
    while True:
        yield {key: draw(param, rng) for key, param in sweep.parameters.items()}


def sample_trials(sweep: SweepConfig, n: int, seed: int) -> list[dict[str, Any]]:
    """The parameters of the first N trials of ``sweep``, the same for the same seed."""
    return list(itertools.islice(iter_trials(sweep, seed), n))


@dataclass
class Trial:
    trial: str
    params: dict[str, Any]
    run_dir: str
    status: str = "pending"  # "running" | "done" | "failed" | "interrupted"
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
    trial.best_epoch, trial.best = pick(series, key=lambda ev: ev[1] or 0.0)
    trial.last = series[-1][1]


def rank(trials: list[Trial], metric: SweepMetric) -> list[Trial]:
    """Scored trials best first (ties: the earlier trial), then the unscored in trial order."""
    scored = [t for t in trials if t.best is not None]
    sign = -1.0 if metric.goal == "maximize" else 1.0
    scored.sort(key=lambda t: sign * (t.best or 0.0))
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
    if is_test_split(split):
        lines += ["", f"**Selected on test:** {split} is a test split (selection.allow_test_split: true); "
                  "every trial picked its epoch, and this board its trial, on the split it reports."]
    return "\n".join(lines) + "\n"


def default_parent(recipe_name: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("checkpoints") / "sweeps" / f"{recipe_name}-local-{stamp}"


STATE = "sweep.json"


def _settings(recipe_arg: str, fixed_overrides: dict[str, Any], metric: SweepMetric, method: str, seed: int) -> dict[str, Any]:
    """What makes two ``sweep --local`` commands the same sweep (N aside: a rerun may ask for more)."""
    return {"recipe": recipe_arg, "overrides": json.loads(json.dumps(fixed_overrides, default=str)),
            "metric": asdict(metric), "method": method, "seed": seed}


def _as_stored(value: Any) -> Any:
    """``value`` as the state file holds it (JSON, secrets masked)."""
    return json.loads(redact_text(json.dumps(value, default=str)))


def _read_state(parent: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    path = parent / STATE
    if not path.exists():
        if (parent / "leaderboard.json").exists():
            raise ConfigError(f"--output-dir {parent} already holds a sweep (leaderboard.json) of an older negtrain; choose another directory")
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        old = {k: state[k] for k in settings}
        trials = [Trial(**t) for t in state["trials"]]
        width = int(state["width"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a sweep state file ({type(exc).__name__}: {str(exc)[:200]}); move it aside or choose another --output-dir") from exc
    differ = [k for k in settings if json.dumps(old[k], sort_keys=True) != json.dumps(_as_stored(settings[k]), sort_keys=True)]
    if differ:
        raise ConfigError(
            f"--output-dir {parent} holds a sweep with another {', '.join(differ)} ({STATE}); rerun its own "
            f"command to continue it (python -m negtrain sweep {shlex.join(state.get('args', []))}), or choose another directory"
        )
    return {"trials": trials, "width": width}


def _trial_error(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    if isinstance(exc, NegtrainError):
        return first or type(exc).__name__
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


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
    """Run ``n`` trials of the recipe's sweep one after another; returns the parent directory.

    The same command again (with the same ``--output-dir``) continues the sweep: finished trials
    are kept, an interrupted one is resumed from its newest checkpoint, missing ones start. A stop
    signal leaves the leaderboard of the trials so far and says how to continue."""
    sweep = loaded.recipe.sweep
    assert sweep is not None
    if not 1 <= n <= MAX_LOCAL_TRIALS:
        raise ConfigError(f"--local {n}: give between 1 and {MAX_LOCAL_TRIALS} trials (for more, use W&B agents on several machines)")
    seed = loaded.recipe.seed if seed is None else seed
    parent = parent or default_parent(loaded.name)
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"--output-dir {parent}: exists and is not a directory")
    count = min(n, grid_size(sweep)) if sweep.method == "grid" else n
    args = ["--recipe", recipe_arg, "--local", str(n), *(["--seed", str(seed)] if seed != loaded.recipe.seed else []),
            "--output-dir", str(parent), *fixed_args]
    continue_command = redact_text(shlex.join(["python", "-m", "negtrain", "sweep", *args]))
    settings = _settings(recipe_arg, fixed_overrides, metric, sweep.method, seed)
    with run_lock(parent):
        state = _read_state(parent, settings)
        if sweep.method == "bayes":
            print("sweep --local: method bayes needs W&B's model of earlier trials; drawing the trials at random instead", flush=True)
        if count < n:
            print(f"sweep --local: the grid has {count} points; running {count} trials, not {n}", flush=True)
        width = state["width"] if state else len(str(count - 1))
        known = {t.trial: t for t in state["trials"]} if state else {}
        extra = {} if metric.name == loaded.recipe.selection.metric else {"selection.metric": metric.name}
        trials: list[Trial] = []

        def save() -> None:
            board = {**settings, "args": args, "width": width, "trials": [asdict(t) for t in trials]}
            write_text(parent / STATE, redact_text(json.dumps(board, indent=1)) + "\n")
            _write_leaderboard(loaded.name, metric, sweep.method, seed, continue_command, parent, trials)

        for k, params in enumerate(itertools.islice(iter_trials(sweep, seed), count)):
            name = f"trial-{k:0{width}d}"
            trial = Trial(name, params, str(parent / name))
            before = known.get(name)
            if before is not None:
                if json.dumps(before.params, sort_keys=True) != json.dumps(_as_stored(params), sort_keys=True):
                    raise ConfigError(f"{parent / STATE}: {name} ran with other parameters than this sweep draws; choose another --output-dir")
                trial.seconds = before.seconds
            trial.status = "running"
            trials.append(trial)
            save()  # the trial is on record before it starts
            _run_trial(trial, k, count, recipe_arg, {**fixed_overrides, **extra}, metric, parent, save, continue_command)
            save()
        # The leaderboard files are the last save()'s (there is at least one trial); only printed here.
        markdown = leaderboard_markdown(loaded.name, metric, sweep.method, seed, trials)
    print(markdown, end="")
    print(f"leaderboard: {parent / 'leaderboard.md'} and leaderboard.json", flush=True)
    return parent


def _run_trial(trial: Trial, k: int, count: int, recipe_arg: str, overrides: dict[str, Any], metric: SweepMetric,
               parent: Path, save: Callable[[], None], continue_command: str) -> None:
    """Run (or continue, or keep) one trial; a failure is the trial's, a stop signal the sweep's."""
    run_dir = Path(trial.run_dir)
    overrides = {**overrides, **trial.params}
    shown = " ".join(override_args(trial.params))
    started = (run_dir / "recipe.yaml").is_file()
    print(f"sweep --local: trial {k + 1}/{count} ({trial.trial}){' continued' if started else ''}: {shown}", flush=True)
    # Each key once (a swept key given on the command line too takes the trial's value).
    command = ["python", "-m", "negtrain", "fit", "--recipe", recipe_arg, *override_args(overrides), "--output-dir", trial.run_dir]
    start = time.perf_counter()
    try:
        if started:
            resume(run_dir)  # finished: nothing to do; killed: from its newest checkpoint
        else:
            fit(load_recipe(recipe_arg, overrides), run_dir, command=command)
        trial.status = "done"
        score_trial(trial, metric)
    except Stopped as stopped:
        trial.status = "interrupted"
        trial.seconds = round((trial.seconds or 0.0) + time.perf_counter() - start, 1)
        save()
        raise stopped.continue_with(f"the sweep in {parent} keeps its finished trials", continue_command) from stopped
    except Exception as exc:
        # One trial's failure (a diverged run, an out-of-memory, a missing package) must not cost the others.
        trial.status = "failed"
        trial.error = _trial_error(exc)
        print(f"sweep --local: {trial.trial} failed: {trial.error}", flush=True)
    trial.seconds = round((trial.seconds or 0.0) + time.perf_counter() - start, 1)
    print(f"sweep --local: {trial.trial}: best {metric.name} {_fmt(trial.best)} (epoch {_fmt(trial.best_epoch)})", flush=True)


def _write_leaderboard(recipe: str, metric: SweepMetric, method: str, seed: int, command: str, parent: Path, trials: list[Trial]) -> None:
    board = {"recipe": recipe, "metric": asdict(metric), "method": method, "seed": seed, "command": command,
             "trials": [asdict(t) for t in rank(trials, metric)]}
    write_text(parent / "leaderboard.json", redact_text(json.dumps(board, indent=1)) + "\n")
    write_text(parent / "leaderboard.md", redact_text(leaderboard_markdown(recipe, metric, method, seed, trials)))
