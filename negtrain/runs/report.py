"""``report``: plots and a Markdown summary of a run, optionally overlaid with a second run.

Written into ``<run>/report/`` (or ``<run>/report-vs-<other run>/`` when comparing):

- ``metrics.png``: one panel per benchmark/split, every metric per epoch; the whole-set headline
  and consistency metrics (their roles, declared in negtrain/metrics/declared.py) drawn bold,
  side by side, per-subset metrics thin;
- ``loss.png``: the training loss per epoch;
- ``summary.md``: the best epoch per metric (direction from the metric's declaration) with its
  standard error and 95% bootstrap interval, the final epoch's table, and the recipe;
- ``figure2.png``: for TINAD eval sets, Figure 2 (accuracy per pattern), the runs side by side.

Where a run recorded intervals, the bold metrics (headline, consistency) are drawn with their
95% interval as a shaded band.

Each PNG carries its panel titles in a ``negtrain:panels`` text chunk, so tools (and tests) can
tell what was drawn without looking at pixels. Only the run files are read: no data, no model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # report writes image files; no display is needed or assumed
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)
from matplotlib.ticker import MaxNLocator  # noqa: E402

from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import selection_bias_note
from negtrain.core.errors import NegtrainError
from negtrain.evaluation.tinad_figure2 import draw_figure2, figure2_section, runs_rows
from negtrain.metrics.declared import headline, role_of
from negtrain.metrics.uncertainty import format_interval, format_stderr
from negtrain.io.atomic import write_text
from negtrain.io.records import TRAIN
from negtrain.runs.reading import RunDir, is_count, is_detail
from negtrain.runs.seeds import SeedGroup, aggregate, is_seed_group
from negtrain.core.secrets import redact_text
from negtrain.models import provenance

STYLES = ("-", "--", ":", "-.")


def _panel_grid(plt, panels: int):
    """Up to three panels a row, one per eval set; the unused cells of the last row removed."""
    cols = min(panels, 3)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.0 * cols, 4 * rows), squeeze=False, layout="constrained")  # room for each legend beside its panel
    for ax in axes.flat[panels:]:
        fig.delaxes(ax)
    return fig, axes


def higher_is_better(run: RunDir, eval_name: str, metric: str) -> bool:
    """The metric's declared direction, as the run recorded it.

    Runs record it on every evaluation line. For an older run that did not, the registered
    benchmark's metric decides; an eval set that is not a registered benchmark (the cue-masking
    corpus, whose mlm_loss falls) cannot be guessed, so that is an error rather than a wrong best.
    """
    if eval_name in run.directions:
        return metric not in run.directions[eval_name]
    try:
        bench = get_benchmark(eval_name.split("/")[0])
    except NegtrainError:
        raise NegtrainError(
            f"{run.path / 'metrics.jsonl'}: '{eval_name}' records no metric directions and is not a registered "
            "benchmark; rerun its evaluation with this version of negtrain to report it"
        ) from None
    return bench.is_higher_better(metric)


def _bold(key: str) -> bool:
    """Drawn bold: a whole-set headline or consistency metric (its declared role), not a subset's."""
    return "/" not in key and role_of(key) in ("headline", "consistency")


def _ordered(keys: list[str]) -> list[str]:
    """The headline and consistency metrics (side by side), then the per-subset metrics."""
    first = headline(keys)  # a headline name is always a whole-set one (bold)
    head = ([first] if first is not None else []) + [k for k in keys if _bold(k) and role_of(k) == "consistency"]
    return head + [k for k in keys if k not in head]


def _series(run: RunDir, eval_name: str, metric: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for ep in run.epochs:
        value = ep.evals.get(eval_name, {}).get(metric)
        if value is not None and not math.isnan(value):
            xs.append(ep.epoch)
            ys.append(value)
    return xs, ys


def _band(run: RunDir, eval_name: str, metric: str) -> tuple[list[int], list[float], list[float]]:
    """Epochs with a recorded ci95 for the metric, and its lower and upper ends."""
    xs, lo, hi = [], [], []
    for ep in run.epochs:
        ci = ep.uncertainty.get(eval_name, {}).get(metric, {}).get("ci95")
        if ci and ci[0] is not None and ci[1] is not None:
            xs.append(ep.epoch)
            lo.append(ci[0])
            hi.append(ci[1])
    return xs, lo, hi


def _metric_keys(runs: list[RunDir], eval_name: str) -> list[str]:
    keys: list[str] = []
    for run in runs:
        for ep in run.epochs:
            keys += [k for k in ep.evals.get(eval_name, {}) if k not in keys and not is_count(eval_name, k) and not is_detail(eval_name, k)]
    return _ordered(keys)


def epoch_axis(ax, epochs: list[int]) -> None:
    """Whole epochs on the x-axis, with half an epoch of room each side: a 1-epoch run gets one
    tick at its epoch instead of matplotlib's -0.045 ... 0.045 around a single point."""

    ax.set_xlabel("epoch")
    if epochs:
        ax.set_xlim(min(epochs) - 0.5, max(epochs) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def marker_size(runs: list[RunDir]) -> float:
    """Bigger markers when there are few epochs: one point per line must still be seen."""
    return 7.0 if max((len(r.epochs) for r in runs), default=0) <= 2 else 3.0


def all_epochs(runs: list[RunDir]) -> list[int]:
    return sorted({ep.epoch for r in runs for ep in r.epochs})


def _save_figure(fig, path: Path, with_axis: bool) -> list[str]:
    """Lay out, save and close ``fig``; its panel titles, which the PNG carries as text (with the
    first panel's epoch axis too where ``with_axis``: :func:`_png_metadata`)."""
    if fig.get_layout_engine() is None:  # a panel grid lays itself out (constrained)
        fig.tight_layout()
    panels = [ax.get_title() for ax in fig.axes]
    metadata = _png_metadata(fig, panels) if with_axis else {"negtrain:panels": ",".join(panels)}
    fig.savefig(path, dpi=110, metadata=metadata)
    plt.close(fig)
    return panels


def _png_metadata(fig, panels: list[str]) -> dict[str, str]:
    """What was drawn, as PNG text chunks: the panel titles and the first panel's epoch axis
    (its limits and ticks, after drawing), so tools and tests need not read pixels."""
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    return {
        "negtrain:panels": ",".join(panels),
        "negtrain:xlim": f"{lo:g},{hi:g}",
        "negtrain:xticks": ",".join(f"{t:g}" for t in ticks),
    }


def plot_metrics(runs: list[RunDir], path: Path):
    evaluations = all(r.is_evaluation for r in runs)

    names: list[str] = []
    for run in runs:
        names += [n for n in run.eval_names if n not in names]
    if not names:
        raise ValueError("no evaluations recorded")
    fig, axes = _panel_grid(plt, len(names))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes.flat, names, strict=False):
        keys = _metric_keys(runs, name)
        for i, key in enumerate(keys):
            for r, run in enumerate(runs):
                xs, ys = _series(run, name, key)
                if not xs:
                    continue
                if evaluations:  # one evaluation each: the runs side by side, not epochs
                    xs = [r] * len(xs)
                label = key if len(runs) == 1 else f"{key} [{run.name}]"
                ax.plot(xs, ys, STYLES[r % len(STYLES)], marker="o", markersize=marker_size(runs), color=colors[i % len(colors)],
                        linewidth=2.2 if _bold(key) else 0.9, label=label)
                bx, lo, hi = _band(run, name, key)
                if _bold(key) and bx:
                    ax.fill_between(bx, lo, hi, color=colors[i % len(colors)], alpha=0.12, linewidth=0)
        ax.set_title(name)
        if evaluations:
            ax.set_xticks(range(len(runs)), [r.name for r in runs], fontsize=7)
            ax.set_xlim(-0.5, len(runs) - 0.5)
        else:
            epoch_axis(ax, all_epochs(runs))
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        # Beside the panel, not over it: a legend inside hides the points it names.
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    title = runs[0].name if len(runs) == 1 else " vs ".join(r.name for r in runs) + "  (" + ", ".join(
        f"{STYLES[i % len(STYLES)]} {r.name}" for i, r in enumerate(runs)) + ")"
    fig.suptitle(title)
    return _save_figure(fig, path, with_axis=True)


def plot_loss(runs: list[RunDir], path: Path) -> list[str]:

    fig, ax = plt.subplots(figsize=(6, 4))
    for r, run in enumerate(runs):
        points = [(ep.epoch, ep.train.loss) for ep in run.epochs if ep.train]
        points = [(x, y) for x, y in points if y is not None]
        if points:
            ax.plot(*zip(*points, strict=False), STYLES[r % len(STYLES)], marker="o", markersize=marker_size(runs), label=run.name)
    ax.set_title("training loss")
    epoch_axis(ax, all_epochs(runs))
    ax.set_ylabel("loss (epoch mean)")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
    return _save_figure(fig, path, with_axis=True)


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


def _with_interval(run: RunDir, name: str, key: str) -> str:
    last = run.epochs[-1]
    value = _fmt(last.evals.get(name, {}).get(key), key, name)
    interval = format_interval(last.uncertainty.get(name, {}).get(key))
    return f"{value} {interval}" if interval and value != "-" else value


def _interval_note(run: RunDir) -> list[str]:
    """How the run's intervals were made: the unit resampled per benchmark."""
    seen = {}
    for ep in run.epochs:
        seen.update(ep.bootstrap)
    if not seen:
        return ["No intervals recorded (a run from before they were, or `evaluation.bootstrap: 0`)."]
    parts = [f"{name}: {b['units']} {b['unit']}s" for name, b in seen.items()]
    resamples = {b["resamples"] for b in seen.values()}
    return ["stderr: lm-evaluation-harness's for per-item means, else the bootstrap's; 95% CI: percentile "
            f"bootstrap ({', '.join(map(str, sorted(resamples)))} resamples) over the independent units ({'; '.join(parts)})."]


def summary_markdown(runs: list[RunDir], warnings: Sequence[str] = ()) -> str:
    """``warnings``: how run A and run B were produced differently (:func:`negtrain.models.provenance.differences`)."""
    main = runs[0]
    if all(r.is_evaluation for r in runs):
        return evaluation_summary(runs, warnings)
    lines = [f"# Run report: {main.name}" + (f" vs {', '.join(r.name for r in runs[1:])}" if len(runs) > 1 else ""), ""]
    for run in runs:
        if run.is_evaluation:
            lines.append(f"- `{run.name}`: an evaluation (recipe `{run.recipe_name}`), no training")
            continue
        sel = run.selected_by
        rule = "the last epoch (selection.epoch: last)" if run.selection.epoch == "last" else (
            f"`{sel}`" if sel else "by a metric the run did not record")
        on_test = " **made on the test split**" if run.selected_on_test else ""
        lines.append(f"- `{run.name}`: recipe `{run.recipe_name}`, {len(run.epochs)} epoch(s), selection {rule}{on_test}")
    for run in runs:
        if run.is_evaluation:
            continue
        sel = run.selected_by
        if sel and run.selection.epoch == "best" and run.selection_split in run.eval_names and len(run.epochs) > 1:
            lines.append(f"- `{run.name}`: {selection_bias_note(sel, len(run.epochs))} (The best-epoch table below "
                         f"is a best-of-{len(run.epochs)} for every metric.)")
        if run.unfinished:
            lines.append(f"- `{run.name}` is unfinished: it {run.unfinished}.")
    for warning in warnings:
        lines.append(f"- warning: `{runs[0].name}` (A) and `{runs[1].name}` (B): {warning}")
    lines += ["", "Plots: `metrics.png` (one panel per benchmark), `loss.png` (training loss).", ""]
    for run in runs:
        if run.is_evaluation:  # one evaluation: no best epoch (its numbers are in the table below)
            continue
        lines += [f"## Best epoch per metric: {run.name}", "",
                  "| benchmark | metric | best | ± stderr | 95% CI | epoch | better |", "|---|---|---|---|---|---|---|"]
        for name, key, value, epoch, higher in best_epochs(run):
            entry = run.epoch(epoch).uncertainty.get(name, {}).get(key)
            lines.append(f"| {name} | {key} | {_fmt(value, key, name)} | {format_stderr(entry) or '-'} | "
                         f"{format_interval(entry) or '-'} | {epoch} | {'higher' if higher else 'lower'} |")
        lines += ["", *_interval_note(run), ""]
    lines += ["## Final epoch", ""]
    header = "| benchmark | metric | " + " | ".join(
        f"{r.name} (epoch {r.epochs[-1].epoch})" if r.epochs and not r.is_evaluation else r.name for r in runs) + " |"
    lines += _final_table(runs, header)
    losses = [(r.name, r.epochs[-1].train.loss) for r in runs if r.epochs and r.epochs[-1].train]
    if losses:
        lines += ["", "Final training loss: " + ", ".join(f"{n} {_fmt(v, 'loss', 'train')}" for n, v in losses)]
    lines += figure2_section(runs_rows(runs), "fractions, at each run's final epoch")
    lines += _recipe_sections(runs)
    return redact_text("\n".join(lines) + "\n")


def _recipe_sections(runs: list[RunDir]) -> list[str]:
    """Each run's recipe (and the command that made it), at the end of a summary."""
    lines: list[str] = []
    for run in runs:
        lines += ["", f"## Recipe: {run.name}", ""]
        if run.command:
            lines += ["```bash", run.command, "```", ""]
        lines += ["```yaml", run.recipe_text.rstrip(), "```"]
    return lines


def _final_table(runs: list[RunDir], header: str) -> list[str]:
    lines = [header, "|---|---|" + "---|" * len(runs)]
    names: list[str] = []
    for run in runs:
        names += [n for n in run.eval_names if n not in names]
    for name in names:
        keys: list[str] = []
        for run in runs:
            if run.epochs:
                keys += [k for k in run.epochs[-1].evals.get(name, {}) if k not in keys and not is_detail(name, k)]
        for key in _ordered(keys):
            cells = [_with_interval(r, name, key) if r.epochs else "-" for r in runs]
            lines.append(f"| {name} | {key} | " + " | ".join(cells) + " |")
    return lines


def evaluation_summary(runs: list[RunDir], warnings: Sequence[str] = ()) -> str:
    """The summary of report cards (or validate/test directories): evaluations, each scored once,
    side by side; no epochs, no training loss, nothing unfinished."""
    lines = [f"# Evaluation report: {' vs '.join(r.name for r in runs)}", ""]
    for run in runs:
        lines.append(f"- `{run.name}`: an evaluation of {len(run.eval_names)} benchmark split(s) (recipe `{run.recipe_name}`); "
                     "its own numbers, baselines and n: its card.md")
    for warning in warnings:
        lines.append(f"- warning: `{runs[0].name}` (A) and `{runs[1].name}` (B): {warning}")
    lines += ["", "Plot: `metrics.png` (one panel per benchmark, the evaluations side by side).", "", "## Scores", ""]
    lines += _final_table(runs, "| benchmark | metric | " + " | ".join(r.name for r in runs) + " |")
    for run in runs:
        lines += ["", *_interval_note(run)]
    lines += figure2_section(runs_rows(runs), "fractions, at each run's final epoch")
    lines += _recipe_sections(runs)
    return redact_text("\n".join(lines) + "\n")


def report(run_dir: Path, other: Path | None = None, *more: Path) -> Path:
    """``more``: further runs beside the first two (side by side in the plots, the tables and
    TINAD's Figure 2, e.g. Figure 2's runs trained on one pattern each)."""
    if is_seed_group(run_dir):
        if other is not None:
            raise NegtrainError(f"--run {run_dir} is a seed group; report it alone (compare two groups' numbers from their summaries)")
        return seed_report(run_dir)
    runs = [RunDir(run_dir)] + [RunDir(p) for p in (other, *more) if p is not None]
    for run in runs:
        if not run.epochs:
            raise NegtrainError(f"--run {run.path}: metrics.jsonl holds no fit epochs to report")
    # Read once: printed here and written into the summary.
    warnings = provenance.differences(provenance.read(runs[0].path), provenance.read(runs[1].path)) if len(runs) > 1 else []
    for warning in warnings:
        print(f"warning: {runs[0].name} (A) and {runs[1].name} (B): {warning}", flush=True)
    out = runs[0].path / ("report" if len(runs) == 1 else "report-vs-" + "-".join(r.name for r in runs[1:]))
    out.mkdir(parents=True, exist_ok=True)
    plot_metrics(runs, out / "metrics.png")
    if all(r.is_evaluation for r in runs):  # no training: no loss to plot (an earlier report's is stale)
        (out / "loss.png").unlink(missing_ok=True)
    else:
        plot_loss(runs, out / "loss.png")
    write_text(out / "summary.md", summary_markdown(runs, warnings))
    draw_figure2(runs_rows(runs), out, "TINAD Figure 2: " + " vs ".join(r.name for r in runs))
    return out


# --------------------------------------------------------------------------------------------
# A seed group (``fit --seeds``): mean, std and every seed per metric and epoch.


def _plot_band(ax, rows: list[dict], color, bold: bool, label: str) -> None:
    points = [r for r in rows if r["mean"] is not None]
    if not points:
        return
    xs = [r["epoch"] for r in points]
    ax.plot(xs, [r["mean"] for r in points], "-", marker="o", markersize=3, color=color, linewidth=2.2 if bold else 0.9, label=label)
    banded = [r for r in points if r["std"] is not None]
    if banded:
        ax.fill_between([r["epoch"] for r in banded], [r["mean"] - r["std"] for r in banded],
                        [r["mean"] + r["std"] for r in banded], color=color, alpha=0.18 if bold else 0.08, linewidth=0)


def plot_seed_metrics(group, summary: dict, path: Path) -> list[str]:
    """One panel per eval set: each metric's mean across seeds, with a ±1 std band."""

    names = [n for n in summary if n != TRAIN]
    if not names:
        raise NegtrainError(f"{group.path}: the seed runs recorded no evaluations")
    fig, axes = _panel_grid(plt, len(names))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes.flat, names, strict=False):
        for i, key in enumerate(_ordered(list(summary[name]))):
            _plot_band(ax, summary[name][key], colors[i % len(colors)], _bold(key), key)
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    fig.suptitle(f"{group.name}: mean ± std over seeds {', '.join(map(str, group.seeds))}")
    return _save_figure(fig, path, with_axis=False)


def plot_seed_loss(group, summary: dict, path: Path) -> list[str]:

    fig, ax = plt.subplots(figsize=(6, 4))
    rows = summary.get(TRAIN, {}).get("loss", [])
    _plot_band(ax, rows, "C0", True, f"mean ± std over {len(group.seeds)} seeds")
    ax.set_title("training loss")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("loss (epoch mean)")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
    return _save_figure(fig, path, with_axis=False)


def _cell(value, key: str = "") -> str:
    return f"{value:.4f}" if value is not None and math.isfinite(value) else "-"


def seed_summary_markdown(group, summary: dict) -> str:
    seeds = [str(s) for s in group.seeds]
    differ = group.recipe_differences()
    lines = [
        f"# Seed report: {group.name}",
        "",
        f"Recipe `{group.recipe_name}`, seeds {', '.join(seeds)} (runs {', '.join(f'`{r.name}`' for r in group.runs)}).",
        "",
        "The seed runs' resolved recipes differ only in `seed`." if not differ
        else f"Warning: the seed runs' recipes differ in more than `seed`: {', '.join(differ)}.",
        "",
        "mean and std (sample standard deviation, n − 1) are over the seeds; they measure training noise. "
        "Each seed run's own report gives its bootstrap interval (test-set sampling noise).",
        "",
        "Plots: `metrics.png` (mean per epoch with a ±1 std band per metric), `loss.png`.",
    ]
    if group.missing:
        lines += ["", "**Missing seeds** (listed in `seeds.json`, not in these numbers): "
                  + "; ".join(f"seed {s}: {why}" for s, why in group.missing) + "."]
    last = max((r["epoch"] for rows in summary.get(next(iter(summary)), {}).values() for r in rows), default=0)
    header = "| benchmark | metric | mean | std | " + " | ".join(f"seed {s}" for s in seeds) + " |"
    rule = "|---|---|---|---|" + "---|" * len(seeds)
    lines += ["", f"## Final epoch ({last})", "", header, rule]
    for name, metrics in summary.items():
        for key in _ordered(list(metrics)):
            row = next((r for r in metrics[key] if r["epoch"] == last), None)
            if row is None:
                continue
            lines.append(f"| {name} | {key} | {_cell(row['mean'])} | {_cell(row['std'])} | "
                         + " | ".join(_cell(row["seeds"].get(s)) for s in seeds) + " |")
    notes = sorted({f"{name} {key}, epoch {row['epoch']}: {row['note']}" for name, metrics in summary.items()
                    for key, rows in metrics.items() for row in rows if row.get("note")})
    if notes:
        lines += ["", *[f"note: {n}" for n in notes[:20]], *([f"note: and {len(notes) - 20} more (summary.json)"] if len(notes) > 20 else [])]
    for name, metrics in summary.items():
        lines += ["", f"## {name} per epoch", "", "| metric | epoch | mean | std | " + " | ".join(f"seed {s}" for s in seeds) + " |",
                  "|---|---|---|---|" + "---|" * len(seeds)]
        for key in _ordered(list(metrics)):
            for row in metrics[key]:
                lines.append(f"| {key} | {row['epoch']} | {_cell(row['mean'])} | {_cell(row['std'])} | "
                             + " | ".join(_cell(row["seeds"].get(s)) for s in seeds) + " |")
    return redact_text("\n".join(lines) + "\n")


def seed_report(parent: Path) -> Path:
    """``report`` on a ``fit --seeds`` parent: metrics.png and loss.png with seed bands, summary.md
    and summary.json (per eval set, metric and epoch: mean, std and each seed's value)."""
    group = SeedGroup.read(parent)
    summary = aggregate(group)
    out = group.path / "report"
    out.mkdir(parents=True, exist_ok=True)
    plot_seed_metrics(group, summary, out / "metrics.png")
    plot_seed_loss(group, summary, out / "loss.png")
    write_text(out / "summary.md", seed_summary_markdown(group, summary))
    data = {"recipe": group.recipe_name, "seeds": group.seeds, "recipes_differ_in": group.recipe_differences(), "metrics": summary,
            "missing_seeds": [{"seed": s, "why": why} for s, why in group.missing]}
    # allow_nan=False: aggregate() turned every NaN into null with a note; valid JSON, or an error here.
    write_text(out / "summary.json", json.dumps(data, indent=1, allow_nan=False) + "\n")
    for seed, why in group.missing:
        print(f"report: seed {seed} is listed in {group.path / 'seeds.json'} but not in the report: {why}", flush=True)
    return out
