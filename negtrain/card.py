"""The negation report card: any model's accuracy and consistency on every negation benchmark its
family can score, with no recipe to write.

``python -m negtrain evaluate --model NAME --family F [--adapter DIR] [--benchmarks all|a,b]
[--shots K] [--out DIR] [--strict]`` builds an evaluation-only recipe, runs it like ``validate``
(the same Trainer, so ``--trainer.devices`` / ``--trainer.strategy`` spread a large model over
several GPUs, and ``--trainer.precision`` defaults to ``auto``), and writes into ``DIR``:

- ``recipe.yaml`` (the resolved benchmarks, prompts and verbalizers), ``metrics.jsonl`` and
  ``predictions/<benchmark>-<split>-validate.jsonl``, in the run-directory format, so
  ``evaluate --predictions`` re-scores every file to the same numbers and ``report --run`` reads
  a card like a one-epoch run;
- ``card.md``: benchmarks x (accuracy, every consistency metric), with the wall time and
  examples/s per benchmark, and the benchmarks skipped (data not found) with the reason;
- ``card.png``: accuracy against consistency, one point per benchmark.

``NAME`` is a Hub id, a local folder, ``pkg:<package>/<dir>``, or a negtrain run directory or
``.ckpt`` (then the run's own recipe.yaml gives the model and family, and its checkpoint the
weights). With ``all``, a benchmark whose data cannot be read is skipped and listed (``--strict``:
an error instead); a benchmark named in ``--benchmarks`` must be readable.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from pathlib import Path
from typing import Any

from lightning.pytorch.utilities.rank_zero import rank_zero_only

from negtrain.benchmarks.matrix import check_supported, resolve_benchmarks, scorable
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark
from negtrain.config import load_yaml, validate_recipe
from negtrain.errors import ConfigError, NegtrainError, unknown_name
from negtrain.io.atomic import write_text
from negtrain.metrics.uncertainty import format_interval
from negtrain.paths import check_output_dir
from negtrain.recipes import LoadedRecipe, apply_overrides, parse_overrides
from negtrain.training import provenance
from negtrain.training.run import evaluate, quiet_third_party_logs

#: The accuracy-like headline of a benchmark, first found wins (NaN-NLI reports F1; ScoNe-NLG, scored
#: by a model, its outcome_choice proxy, shown under that name).
ACCURACY_KEYS = ("accuracy", "f1", "negated_top1_error", "outcome_choice_accuracy")
#: Metric families that measure consistency over a contrast set / group.
CONSISTENCY_BASES = ("consistency", "coherence", "strict", "outcome_choice_consistency")


def _run_source(name: str) -> tuple[Path, Path] | None:
    """(recipe.yaml, checkpoint) when ``name`` is a negtrain run directory or a .ckpt in one."""
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".ckpt":
        run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        if not (run / "recipe.yaml").is_file():
            raise ConfigError(f"--model {name}: a .ckpt outside a negtrain run directory (no {run / 'recipe.yaml'})")
        return run / "recipe.yaml", path
    if path.is_dir() and (path / "recipe.yaml").is_file() and not (path / "checkpoints").is_dir():
        raise ConfigError(
            f"--model {name}: holds a recipe.yaml but no checkpoints/ folder, so no weights: a run directory whose "
            "checkpoints were removed, or a report card; give a run with checkpoints/, a .ckpt, or a model folder"
        )
    if path.is_dir() and (path / "recipe.yaml").is_file() and (path / "checkpoints").is_dir():
        best = sorted((path / "checkpoints").glob("best-epoch*.ckpt"), key=lambda p: p.stat().st_mtime)
        checkpoint = best[-1] if best else path / "checkpoints" / "last.ckpt"
        if not checkpoint.is_file():
            raise ConfigError(f"--model {name}: the run holds no checkpoints/best-epoch*.ckpt or last.ckpt")
        return path / "recipe.yaml", checkpoint
    return None


def card_recipe(
    model: str,
    family: str | None,
    benchmarks: str,
    shots: int,
    adapter: str | None,
    overrides: dict[str, Any],
) -> tuple[dict[str, Any], Path | None]:
    """The evaluation-only recipe (raw mapping) and the checkpoint to load, if any."""

    source = _run_source(model)
    checkpoint = None
    if source is not None:
        run_recipe = load_yaml(source[0])
        model_section = dict(run_recipe["model"])
        # A run's model.prompt was written for its own benchmark; the card puts every benchmark
        # to the model with that benchmark's default prompt.
        model_section.pop("prompt", None)
        adapter_section = dict(run_recipe.get("adapter") or {"type": "none"})
        if family is not None and family != model_section.get("family", "nli"):
            raise ConfigError(f"--family {family}: the run at {model} trained a '{model_section.get('family')}' model")
        checkpoint = source[1]
    else:
        if family is None:
            raise ConfigError("evaluate --model needs --family (nli, seq2seq, causal_lm or mlm)")
        model_section = {"name": model, "family": family}
        adapter_section = {"type": "none"}
    family = model_section.get("family", "nli")
    if adapter is not None:
        if source is not None:
            raise ConfigError("--adapter: a run directory brings its own weights; give the base model's name instead")
        adapter_section = {"type": "lora", "path": adapter}
    if benchmarks == "all":
        data_eval: Any = "all"
    else:
        names = [b.strip() for b in benchmarks.split(",") if b.strip()]
        if not names:
            raise ConfigError("--benchmarks: give 'all' or a comma-separated list of benchmarks")
        for name in names:
            if name not in BENCHMARKS:

                raise unknown_name("benchmark", name, BENCHMARKS)

        for name in names:
            check_supported(get_benchmark(name), family, f"--benchmarks {name}")
        data_eval = [{"benchmark": b, "split": s} for b, s in scorable(family, names)]
    raw: dict[str, Any] = {
        "description": f"negation report card of {model} ({family})",
        "model": model_section,
        "adapter": adapter_section,
        "data": {"eval": data_eval, "eval_batch_size": 32},
        "trainer": {"precision": "auto", "enable_progress_bar": False},
        "logger": "none",
    }
    if shots:
        if family not in ("seq2seq", "causal_lm"):
            raise ConfigError(f"--shots: few-shot prompts are for the seq2seq and causal_lm families, not '{family}'")
        raw["data"]["shots"] = shots  # spread over the entries once `all` is expanded, below
    if overrides:

        raw = apply_overrides(raw, overrides)
    return raw, checkpoint


def default_out(model: str, family: str | None) -> Path:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model.rstrip("/")).name or model).strip("_") or "model"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("cards") / f"{stem}-{family or 'run'}-{stamp}"


def _llm_settings(raw: dict[str, Any], args) -> None:
    """--chat, --system, --fewshot-as-multiturn and --no-log-samples into the raw recipe."""
    chat = getattr(args, "chat", False)
    system = getattr(args, "system", None)
    multiturn = getattr(args, "fewshot_as_multiturn", False)
    if (system is not None or multiturn) and not chat:
        raise ConfigError("--system and --fewshot-as-multiturn shape a chat prompt; add --chat")
    if chat:
        if raw["model"].get("family", "nli") not in ("seq2seq", "causal_lm"):
            raise ConfigError(f"--chat: chat templates are for the seq2seq and causal_lm families, not '{raw['model'].get('family')}'")
        raw["model"].update({"chat": True, "system": system, "fewshot_as_multiturn": multiturn})
    if not getattr(args, "log_samples", True):
        raw.setdefault("evaluation", {})["log_samples"] = False


def _apply_strategy(recipe, name: str, named: bool) -> None:
    """``--strategy NAME`` on every eval entry whose benchmark has it (``named``: the benchmarks
    were named, so each must have it)."""
    from negtrain.prompts.strategies import get_strategy, strategies

    applied = 0
    for entry in recipe.data.eval:
        if name not in strategies(entry.benchmark):
            if named and get_benchmark(entry.benchmark).answer_type not in ("choice", "cloze"):
                get_strategy(entry.benchmark, name)  # raises: no such strategy (did you mean)
            continue
        entry.strategy, entry.prompt, entry.verbalizer = name, None, None
        applied += 1
    if not applied:
        raise ConfigError(f"--strategy {name}: no benchmark of the card has a strategy of that name (see evaluate --list)")


def make_card(args, extra: list[str]) -> Path:
    from negtrain.prompts.protocols import get_protocol

    overrides = parse_overrides(extra)
    protocol = get_protocol(args.protocol) if getattr(args, "protocol", None) else None
    raw, checkpoint = card_recipe(args.model, args.family, args.benchmarks, 0 if protocol else args.shots, args.adapter, overrides)
    if protocol is not None:
        from negtrain.protocol import eval_entries

        raw["data"]["eval"] = eval_entries(protocol, getattr(args, "chat", False))
    _llm_settings(raw, args)
    shots = raw["data"].pop("shots", 0)
    where = "evaluate --model"
    recipe = validate_recipe(raw, where)
    # Resolved here, before any model is loaded: unsupported pairs and unreadable benchmarks are
    # found in seconds, and the skipped ones go into the card.
    try:
        skipped = resolve_benchmarks(recipe)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if skipped and args.strict:
        raise ConfigError(
            f"{where} --strict: cannot read " + "; ".join(f"{s.benchmark}/{s.split} ({s.reason})" for s in skipped)
        )
    strategy = getattr(args, "strategy", None)
    if strategy:
        _apply_strategy(recipe, strategy, named=args.benchmarks != "all")
    if shots:
        for entry in recipe.data.eval:
            # Multiple choice and cloze probes build their own context: no prompt to put shots in.
            if get_benchmark(entry.benchmark).answer_type not in ("choice", "cloze"):
                entry.shots = shots
    if shots or strategy:
        try:
            resolve_benchmarks(recipe, announce=False)  # fills each entry's shots_split, the strategy's verbalizer
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    out = args.out or default_out(args.model, args.family)
    check_output_dir(out, "--out")  # before the model loads: an unwritable --out fails at once
    if (out / "metrics.jsonl").exists():
        raise ConfigError(f"--out {out} already holds results (metrics.jsonl); choose another directory")
    quiet_third_party_logs()
    loaded = LoadedRecipe(name=f"card:{args.model}", path=Path(where), recipe=recipe)
    evaluate(loaded, "validate", checkpoint, out, write_recipe=True)
    if rank_zero_only.rank == 0:  # under DDP every rank returns here; one writes the card
        write_card(out, args.model, recipe.model.family, skipped)
        print(f"report card: {out / 'card.md'}, {out / 'card.png'}")
        if protocol is not None:
            from negtrain.protocol import write_protocol

            records = [r for r in _records(out) if r.get("stage") == "validate"]
            write_protocol(out, protocol, records, args.model, recipe.evaluation.bootstrap, recipe.evaluation.bootstrap_seed)
            print(f"protocol {protocol.name}: {out / 'protocol.md'}")
    return out


# ---- the card files ----------------------------------------------------------------------------


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def headline_accuracy(metrics: dict[str, float | None]) -> str | None:
    return next((k for k in ACCURACY_KEYS if k in metrics), None)


def consistency_keys(metrics: dict[str, float | None]) -> list[str]:
    return [k for k in metrics if k.split("/")[0] in CONSISTENCY_BASES]


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def _with_ci(value: float | None, spread: dict | None) -> str:
    """The value with its ci95 when one was computed: ``0.8500 [0.8150, 0.9000]``."""
    interval = format_interval(spread)
    return _fmt(value) + (f" {interval}" if interval and _fmt(value) != "-" else "")


def card_markdown(records: list[dict], model: str, family: str, skipped, record: dict | None = None) -> str:
    """``record``: the card's provenance (:mod:`negtrain.training.provenance`), shown at the end."""
    evals = [r for r in records if r["benchmark"] != "train"]
    columns: list[str] = []
    for r in evals:
        columns += [k for k in consistency_keys(r["metrics"]) if k not in columns]
    lines = [f"# Negation report card: `{model}` ({family})", ""]
    lines.append("| benchmark | split | accuracy | " + " | ".join(columns) + (" | " if columns else "") + "n | seconds | examples/s | tokens generated |")
    lines.append("|---|---|---|" + "---|" * len(columns) + "---|---|---|---|")
    notes = []
    units: list[str] = []
    for r in evals:
        m = r["metrics"]
        spread = r.get("uncertainty") or {}
        acc = headline_accuracy(m)
        acc_cell = "-" if acc is None else _with_ci(m[acc], spread.get(acc)) + ("" if acc == "accuracy" else f" ({acc})")
        n = m.get("n")
        seconds = r.get("eval_seconds")
        rate = f"{n / seconds:.1f}" if n and seconds else "-"
        cells = [_with_ci(m.get(k), spread.get(k)) if k in m else "" for k in columns]
        if r.get("bootstrap"):
            units.append(f"- {r['benchmark']}/{r['split']}: {r['bootstrap']['units']} × {r['bootstrap']['unit']}")
        name = r["benchmark"] + (f" ({r['variant']})" if r.get("variant") else "")
        lines.append(
            f"| {name} | {r['split']} | {acc_cell} | " + " | ".join(cells) + (" | " if columns else "")
            + f"{int(n) if n is not None else '-'} | {seconds if seconds is not None else '-'} | {rate} | {r.get('tokens_generated', '-')} |"
        )
        if r.get("note"):
            notes.append(f"- {r['benchmark']}/{r['split']}: {r['note']}")
    lines.append("")
    lines.append("`-`: undefined on what was scored (e.g. no complete contrast group); empty: the benchmark has no such metric.")
    if units:
        lines += [
            "",
            "Brackets: the 95% percentile-bootstrap interval, resampling each benchmark's independent unit "
            "(a contrast group is resampled whole, so consistency intervals are honest):",
            "",
            *units,
        ]
    if skipped:
        lines += ["", "## Skipped", ""]
        lines += [f"- {s.benchmark}/{s.split}: {s.reason}" for s in skipped]
    if notes:
        lines += ["", "## Notes", "", *notes]
    lines += ["", "Predictions: `predictions/`; every number above is what `negtrain evaluate --predictions` gives on those files.", ""]
    lines += provenance.markdown(record)
    return "\n".join(lines)


def plot_card(records: list[dict], path: Path, title: str) -> list[str]:
    """Accuracy (x) against the headline consistency (y), one labelled point per benchmark.
    The PNG's ``negtrain:points`` text chunk names the benchmarks drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    drawn = []
    for r in records:
        if r["benchmark"] == "train":
            continue
        m = r["metrics"]
        acc, cons = headline_accuracy(m), consistency_keys(m)
        if acc is None or not cons or m.get(acc) is None or m.get(cons[0]) is None:
            continue
        name = f"{r['benchmark']}/{r['split']}" + (f"/{r['variant']}" if r.get("variant") else "")
        ax.scatter(m[acc], m[cons[0]], s=30)
        ax.annotate(f"{name} ({cons[0]})", (m[acc], m[cons[0]]), fontsize=7, xytext=(3, 3), textcoords="offset points")
        drawn.append(name)
    ax.plot([0, 1], [0, 1], ":", color="grey", linewidth=0.8)  # consistency can never exceed accuracy much
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("accuracy (NaN-NLI: F1)")
    ax.set_ylabel("consistency (all of a contrast group right)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"negtrain:points": ",".join(drawn)})
    plt.close(fig)
    return drawn


def write_card(out: Path, model: str, family: str, skipped) -> None:

    records = [r for r in _records(out) if r.get("stage") == "validate"]
    if not records:
        raise NegtrainError(f"{out / 'metrics.jsonl'}: no evaluation was recorded")
    write_text(out / "card.md", card_markdown(records, model, family, skipped, provenance.read(out)))
    plot_card(records, out / "card.png", f"{model} ({family})")
