"""``report``: plots and a Markdown summary of a run, optionally overlaid with a second run.

Written into ``<run>/report/`` (or ``<run>/report-vs-<other run>/`` when comparing):

- ``metrics.png``: one panel per benchmark/split, every metric per epoch; accuracy and the
  consistency metrics drawn bold, side by side, per-subset accuracies thin;
- ``loss.png``: the training loss per epoch;
- ``summary.md``: the best epoch per metric (direction from the metric's declaration), the final
  epoch's table, and the recipe.

Each PNG carries its panel titles in a ``negtrain:panels`` text chunk, so tools (and tests) can
tell what was drawn without looking at pixels. Only the run files are read: no data, no model.
"""

from __future__ import annotations

import math
from pathlib import Path

from negtrain.errors import NegtrainError
from negtrain.io.atomic import write_text
from negtrain.runs import RunDir, is_count
from negtrain.secrets import redact_text

STYLES = ("-", "--", ":", "-.")
BOLD = ("accuracy", "consistency")


def higher_is_better(run: RunDir, eval_name: str, metric: str) -> bool:
    """The metric's declared direction, as the run recorded it.

    Runs record it on every evaluation line. For an older run that did not, the registered
    benchmark's metric decides; an eval set that is not a registered benchmark (the cue-masking
    corpus, whose mlm_loss falls) cannot be guessed, so that is an error rather than a wrong best.
    """
    if eval_name in run.directions:
        return metric not in run.directions[eval_name]
    from negtrain.benchmarks.registry import get_benchmark

    try:
        bench = get_benchmark(eval_name.split("/")[0])
    except NegtrainError:
        raise NegtrainError(
            f"{run.path / 'metrics.jsonl'}: '{eval_name}' records no metric directions and is not a registered "
            "benchmark; rerun its evaluation with this version of negtrain to report it"
        ) from None
    return bench.is_higher_better(metric)


def _ordered(keys: list[str]) -> list[str]:
    """accuracy, consistency (side by side), then the per-subset metrics."""
    head = [k for k in BOLD if k in keys]
    return head + [k for k in keys if k not in head]


def _series(run: RunDir, eval_name: str, metric: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for ep in run.epochs:
        value = ep.evals.get(eval_name, {}).get(metric)
        if value is not None and not math.isnan(value):
            xs.append(ep.epoch)
            ys.append(value)
    return xs, ys


def _metric_keys(runs: list[RunDir], eval_name: str) -> list[str]:
    keys: list[str] = []
    for run in runs:
        for ep in run.epochs:
            keys += [k for k in ep.evals.get(eval_name, {}) if k not in keys and not is_count(eval_name, k)]
    return _ordered(keys)


def plot_metrics(runs: list[RunDir], path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names: list[str] = []
    for run in runs:
        names += [n for n in run.eval_names if n not in names]
    if not names:
        raise ValueError("no evaluations recorded")
    cols = min(len(names), 3)
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(names) :]:
        fig.delaxes(ax)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes.flat, names):
        keys = _metric_keys(runs, name)
        for i, key in enumerate(keys):
            for r, run in enumerate(runs):
                xs, ys = _series(run, name, key)
                if not xs:
                    continue
                label = key if len(runs) == 1 else f"{key} [{run.name}]"
                ax.plot(xs, ys, STYLES[r % len(STYLES)], marker="o", markersize=3, color=colors[i % len(colors)],
                        linewidth=2.2 if key in BOLD else 0.9, label=label)
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    title = runs[0].name if len(runs) == 1 else " vs ".join(r.name for r in runs) + "  (" + ", ".join(
        f"{STYLES[i % len(STYLES)]} {r.name}" for i, r in enumerate(runs)) + ")"
    fig.suptitle(title)
    fig.tight_layout()
    panels = [ax.get_title() for ax in fig.axes]
    fig.savefig(path, dpi=110, metadata={"negtrain:panels": ",".join(panels)})
    plt.close(fig)
    return panels


def plot_loss(runs: list[RunDir], path: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 4))
    for r, run in enumerate(runs):
        points = [(ep.epoch, ep.train["metrics"].get("loss")) for ep in run.epochs if ep.train]
        points = [(x, y) for x, y in points if y is not None]
        if points:
            ax.plot(*zip(*points), STYLES[r % len(STYLES)], marker="o", label=run.name)
    ax.set_title("training loss")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("loss (epoch mean)")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    panels = [a.get_title() for a in fig.axes]
    fig.savefig(path, dpi=110, metadata={"negtrain:panels": ",".join(panels)})
    plt.close(fig)
    return panels


def _fmt(value: float | None, key: str, eval_name: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(int(value)) if is_count(eval_name, key) else f"{value:.4f}"


def best_epochs(run: RunDir) -> list[tuple[str, str, float, int, bool]]:
    """(eval set, metric, best value, its epoch, higher is better) for every metric of the run."""
    out = []
    for name in run.eval_names:
        for key in _metric_keys([run], name):
            xs, ys = _series(run, name, key)
            if not xs:
                continue
            higher = higher_is_better(run, name, key)
            best = (max if higher else min)(range(len(ys)), key=lambda i: (ys[i], -xs[i]) if higher else (ys[i], xs[i]))
            out.append((name, key, ys[best], xs[best], higher))
    return out


def summary_markdown(runs: list[RunDir]) -> str:
    main = runs[0]
    lines = [f"# Run report: {main.name}" + (f" vs {', '.join(r.name for r in runs[1:])}" if len(runs) > 1 else ""), ""]
    for run in runs:
        sel = run.recipe.selection.metric
        lines.append(f"- `{run.name}`: recipe `{run.recipe_name}`, {len(run.epochs)} epoch(s), selection `{sel or 'first eval metric'}`")
    lines += ["", "Plots: `metrics.png` (one panel per benchmark), `loss.png` (training loss).", ""]
    for run in runs:
        lines += [f"## Best epoch per metric: {run.name}", "", "| benchmark | metric | best | epoch | better |", "|---|---|---|---|---|"]
        for name, key, value, epoch, higher in best_epochs(run):
            lines.append(f"| {name} | {key} | {_fmt(value, key, name)} | {epoch} | {'higher' if higher else 'lower'} |")
        lines.append("")
    lines += ["## Final epoch", ""]
    header = "| benchmark | metric | " + " | ".join(f"{r.name} (epoch {r.epochs[-1].epoch})" if r.epochs else r.name for r in runs) + " |"
    lines += [header, "|---|---|" + "---|" * len(runs)]
    names: list[str] = []
    for run in runs:
        names += [n for n in run.eval_names if n not in names]
    for name in names:
        keys: list[str] = []
        for run in runs:
            if run.epochs:
                keys += [k for k in run.epochs[-1].evals.get(name, {}) if k not in keys]
        for key in _ordered(keys):
            cells = [_fmt(r.epochs[-1].evals.get(name, {}).get(key), key, name) if r.epochs else "-" for r in runs]
            lines.append(f"| {name} | {key} | " + " | ".join(cells) + " |")
    losses = [(r.name, r.epochs[-1].train["metrics"].get("loss")) for r in runs if r.epochs and r.epochs[-1].train]
    if losses:
        lines += ["", "Final training loss: " + ", ".join(f"{n} {_fmt(v, 'loss', 'train')}" for n, v in losses)]
    for run in runs:
        lines += ["", f"## Recipe: {run.name}", ""]
        if run.command:
            lines += ["```bash", run.command, "```", ""]
        lines += ["```yaml", run.recipe_text.rstrip(), "```"]
    return redact_text("\n".join(lines) + "\n")


def report(run_dir: Path, other: Path | None = None) -> Path:
    runs = [RunDir(run_dir)] + ([RunDir(other)] if other is not None else [])
    for run in runs:
        if not run.epochs:
            from negtrain.errors import NegtrainError

            raise NegtrainError(f"--run {run.path}: metrics.jsonl holds no fit epochs to report")
    out = runs[0].path / ("report" if len(runs) == 1 else f"report-vs-{runs[1].name}")
    out.mkdir(parents=True, exist_ok=True)
    plot_metrics(runs, out / "metrics.png")
    plot_loss(runs, out / "loss.png")
    write_text(out / "summary.md", summary_markdown(runs))
    return out
