"""``export``: a run's checkpoint as a folder that ``from_pretrained`` loads, with a model card.

The folder holds:

- the model (``config.json`` with the head's ``id2label`` / ``label2id``, ``model.safetensors``) and
  the tokenizer; for a LoRA run either the adapter alone (``adapter_config.json``,
  ``adapter_model.safetensors``, loaded with ``peft``) or, with ``merge_adapter``, the adapter
  merged into the base weights (a plain transformers model);
- ``negtrain_recipe.yaml``: the run's resolved recipe;
- ``negtrain_export.json``: which run, checkpoint and epoch it came from, and that epoch's metrics;
- ``provenance.json``: the run's (versions, machine, model revision, data file hashes, seed);
- ``README.md``: the model card (YAML metadata with ``model-index`` results, the metrics table, the
  exact training command, the provenance, citations of the benchmarks).

The weights are rebuilt from the Lightning checkpoint alone (``model.*`` keys of its state dict)
and the HF config saved in the run's ``model/`` folder, so exporting needs neither the Hub nor the
base model. A LoRA run is recognised by ``model/adapter_config.json`` (a ``peft`` config saved by
``fit``) or by adapter weights in the checkpoint. A checkpoint that holds only the adapter and the
head (what an adapter run saves) is loaded onto the recipe's base model, rebuilt unquantized: the
one case that needs the base model. The folder is built in a temporary directory next to ``out``
and renamed into place, so ``out`` is never half-written.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import families_where, family_names, selection_bias_note
from negtrain.core.errors import NegtrainError
from negtrain.metrics.baselines import at_or_below, highest
from negtrain.metrics.uncertainty import format_interval, format_stderr
from negtrain.io.atomic import atomic_dir
from negtrain.models.sources import hub_id, resolve_model_name
from negtrain.core.paths import check_output_dir
from negtrain.runs.reading import RunDir, is_count
from negtrain.core.secrets import redact_text
from negtrain.models import provenance

ADAPTER_CONFIG = "adapter_config.json"


@dataclass
class Exported:
    path: Path
    checkpoint: Path
    epoch: int
    adapter: bool  # adapter-only (peft) folder
    merged: bool


def _is_adapter_state(state: dict[str, Any]) -> bool:
    return any(".lora_" in k or k.startswith("base_model.model.") for k in state)


def load_model(run: RunDir, checkpoint: Path):
    """The run's HF model (a peft model for a LoRA run) with the checkpoint's weights, and its epoch."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    model_dir = run.path / "model"
    if not (model_dir / "config.json").is_file():
        raise NegtrainError(f"--run {run.path}: no model/config.json (the run's HF config)")
    if not run.recipe.model.exports:
        raise NegtrainError(
            f"export supports the {family_names(families_where('exports'))} family (sequence classification); "
            f"this run is '{run.recipe.model.family}'"
        )
    from negtrain.io.checkpoint_reading import read_checkpoint  # torch: after the preflight's checks

    ckpt = read_checkpoint(checkpoint, what="checkpoint", require_recipe=False)  # the run dir was checked
    check_finite({k: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}, checkpoint)
    if ckpt.get("negtrain_adapter_only"):
        return _adapter_run_model(run, checkpoint).eval(), int(ckpt.get("epoch", -1))
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    if not state:
        raise NegtrainError(f"{checkpoint}: no model.* weights in the checkpoint's state_dict")
    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_config(config)
    if (model_dir / ADAPTER_CONFIG).is_file() or _is_adapter_state(state):
        if not (model_dir / ADAPTER_CONFIG).is_file():
            raise NegtrainError(f"{checkpoint} holds adapter weights but {model_dir / ADAPTER_CONFIG} is missing")
        from peft import PeftConfig, get_peft_model

        model = get_peft_model(model, PeftConfig.from_pretrained(str(model_dir)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied weights (e.g. an LM's decoder) may be absent from a checkpoint; nothing else may be.
    tied = set(getattr(model, "_tied_weights_keys", None) or [])
    missing = [k for k in missing if k not in tied]
    if missing or unexpected:
        raise NegtrainError(
            f"{checkpoint} does not match the run's model/config.json: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    return model.eval(), int(ckpt.get("epoch", -1))


def check_finite(state: dict[str, Any], checkpoint: Path) -> None:
    """Refuse weights holding NaN or infinity: a diverged run's checkpoint exports and loads
    without complaint and then predicts one label for every input."""
    import torch  # here, not at the top: export's refusals answer before torch loads

    bad = [
        (name, int((~torch.isfinite(t)).sum()), t.numel())
        for name, t in state.items()
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all())
    ]
    if bad:
        total = sum(t.numel() for t in state.values() if isinstance(t, torch.Tensor) and t.is_floating_point())
        shown = ", ".join(f"{name} ({k:,} of {n:,})" for name, k, n in bad[:3]) + (", ..." if len(bad) > 3 else "")
        raise NegtrainError(
            f"{checkpoint}: {len(bad)} of {len(state)} weight tensors hold NaN or infinite values "
            f"({sum(k for _, k, _ in bad):,} of {total:,} values: {shown}); the run diverged, so "
            "this checkpoint is not exported (choose another with --checkpoint best|last)"
        )


def _adapter_run_model(run: RunDir, checkpoint: Path):
    """The peft model of an adapter run whose checkpoint holds only the adapter and the head (see
    :mod:`negtrain.models.adapters`): the recipe's model is rebuilt, in full precision (a QLoRA
    adapter goes onto the unquantized base), and the checkpoint loaded onto it. This is the one
    case where exporting needs the base model (``model.name``)."""
    from negtrain.training.build import build, reload_weights  # the training floor's: only for this case

    recipe = run.recipe.model_copy(deep=True)
    if recipe.adapter.type == "qlora":
        recipe.adapter = recipe.adapter.model_copy(update={"type": "lora"})
    built = build(recipe, stage="validate" if recipe.data.eval else "fit")
    reload_weights(built.module, str(checkpoint))
    return built.module.model


def _prepare_out(out: Path, overwrite: bool) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise NegtrainError(f"--out {out} already exists and is not empty (pass --overwrite to replace it)")
    # The folder is built beside --out and renamed into place: its parent must be writable.
    check_output_dir(out.parent if out.exists() else out, "--out")


def preflight(run_dir: Path, out: Path, checkpoint: str = "best", overwrite: bool = False) -> tuple[RunDir, str, Path]:
    """Every check of an export that needs no model, before torch or transformers load: the run,
    its recipe and records, the checkpoint asked for, and ``out``. Returns the run, the checkpoint
    asked for (``best`` of a run that selected nothing is its ``last``) and its path. ``export``
    runs it first; the ``export`` command runs it before anything heavy, so a mistake answers in
    about a second."""
    run = RunDir(run_dir)
    _prepare_out(Path(out), overwrite)
    if checkpoint == "best" and run.selection.epoch == "last":
        checkpoint = "last"  # the run selected nothing: its result is its last epoch
    ckpt_path = run.checkpoint(checkpoint)
    _ = run.recipe, run.epochs  # fail on a broken recipe or metrics file before the heavy work
    return run, checkpoint, ckpt_path


def export(
    run_dir: Path,
    out: Path,
    checkpoint: str = "best",
    merge_adapter: bool = False,
    overwrite: bool = False,
    repo_id: str | None = None,
    license: str | None = None,
) -> Exported:
    """Write the export folder ``out``; ``repo_id`` names the model in the card (for ``push``).

    ``license``: the card's license; by default the base model's, read from its local model card.
    """
    out = Path(out)
    run, checkpoint, ckpt_path = preflight(run_dir, out, checkpoint, overwrite)
    from transformers import AutoTokenizer

    model, epoch = load_model(run, ckpt_path)
    is_peft = hasattr(model, "peft_config")
    if merge_adapter and not is_peft:
        raise NegtrainError(f"--merge-adapter: run {run.path} has no adapter (not a LoRA run)")
    if is_peft and merge_adapter:
        model = model.merge_and_unload()
    adapter_only = is_peft and not merge_adapter

    # Built in a temporary sibling, fsync'd and renamed into place: `out` is never half-written.
    with atomic_dir(out, replace=True) as tmp:
        model.save_pretrained(str(tmp))
        tokenizer = AutoTokenizer.from_pretrained(run.path / "model")
        tokenizer.save_pretrained(str(tmp))
        if adapter_only:
            # The head's labels travel with the adapter: the base model alone does not know them.
            model.base_model.model.config.save_pretrained(str(tmp / "base_config"))
        (tmp / "negtrain_recipe.yaml").write_text(redact_text(run.recipe_text), encoding="utf-8")
        metrics = run.epoch(epoch).evals if epoch >= 0 else {}
        info = {
            "run": run.name,
            "recipe": run.recipe_name,
            "checkpoint": ckpt_path.name,
            "which": checkpoint,
            "epoch": epoch,
            "adapter_only": adapter_only,
            "merged_adapter": is_peft and merge_adapter,
            "metrics": metrics,
            "unfinished": run.unfinished,  # None for a run that trained to its end
        }
        (tmp / "negtrain_export.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        record = provenance.read(run.path)
        if record is not None:  # what produced the weights, beside them (older runs have none)
            provenance.write(tmp, record)
        card = model_card(
            run, epoch, checkpoint, repo_id or run.model_name, adapter_only=adapter_only, merged=is_peft and merge_adapter, license=license
        )
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return Exported(out, ckpt_path, epoch, adapter=adapter_only, merged=is_peft and merge_adapter)


# --------------------------------------------------------------------------------------------
# The model card.


def _fmt(value: float | None, key: str, eval_name: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(int(value)) if is_count(eval_name, key) else f"{value:.4f}"


def _benchmark(name: str):
    try:
        return get_benchmark(name)
    except NegtrainError:
        return None


def _dataset_id(bench, split: str) -> str | None:
    """The Hub dataset the benchmark is read from; None where it comes from elsewhere (its
    authors' GitHub repository: :func:`_dataset_link`), since a card's ``datasets`` must resolve
    on the Hub."""
    files = bench.files(split)
    return getattr(files[0], "dataset", None) if files else None


def _dataset_link(bench, split: str) -> str | None:
    """Where a benchmark not on the Hub is published: its authors' repository, as a link."""
    files = bench.files(split)
    repo = getattr(files[0], "repo", None) if files else None
    return f"https://github.com/{repo}" if repo else None


def _metric_entry(name: str, value: float) -> dict[str, Any]:
    base, _, subset = name.partition("/")
    return {"type": base, "name": f"{base} ({subset})" if subset else base, "value": round(float(value), 6)}


def base_model_license(name: str) -> str | None:
    """The ``license`` in the front matter of the base model's card, when the card is on disk
    (a local or packaged model, or one already in the Hugging Face cache); None otherwise."""
    try:
        path = Path(resolve_model_name(name))
    except NegtrainError:
        return None
    card = path / "README.md" if path.is_dir() else None
    if card is None:
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(name, "README.md")
        except Exception:  # not a Hub id, or no cache: no license to inherit
            return None
        card = Path(cached) if isinstance(cached, str) else None
    if card is None or not card.is_file():
        return None
    text = card.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return None
    try:
        meta = yaml.safe_load(text.split("---", 2)[1]) or {}
    except yaml.YAMLError:
        return None
    value = meta.get("license") if isinstance(meta, dict) else None
    return str(value) if value else None


def card_metadata(
    run: RunDir, results: dict[str, dict[str, float | None]], model_name: str, adapter_only: bool, license: str = "other"
) -> dict[str, Any]:
    recipe = run.recipe
    base = recipe.model.name
    benches = []
    entries = []
    for name, metrics in results.items():
        bench_name, _, split = name.partition("/")
        bench = _benchmark(bench_name)
        dataset = _dataset_id(bench, split) if bench is not None else None
        if dataset is not None and dataset not in benches:
            benches.append(dataset)
        values = [
            _metric_entry(k, v) for k, v in metrics.items()
            if not is_count(name, k) and v is not None and not math.isnan(v)
        ]
        if values:
            entries.append({
                "task": {"type": "text-classification", "name": "Natural Language Inference"},
                # A Hub dataset id where there is one; else the benchmark's name (the card's
                # Results section links its authors' repository).
                "dataset": {"name": f"{bench_name} ({split})", "type": dataset or bench_name, "split": split},
                "metrics": values,
            })
    meta: dict[str, Any] = {}
    if hub_id(base):
        meta["base_model"] = hub_id(base)  # a Hub id (a packaged model's where known); a local path has none
    meta.update({
        "library_name": "peft" if adapter_only else "transformers",
        "pipeline_tag": "text-classification",
        "license": license,
        **({"datasets": benches} if benches else {}),
        # each tag once: a benchmark evaluated on several splits is one tag
        "tags": list(dict.fromkeys(["negtrain", "negation", "natural-language-inference", *[n.split("/")[0] for n in results],
                                    *(["unfinished-run"] if run.unfinished else [])])),
        "model-index": [{"name": model_name, "results": entries}],
    })
    return meta


def model_card(
    run: RunDir, epoch: int, which: str, model_name: str, adapter_only: bool = False, merged: bool = False, license: str | None = None
) -> str:
    recipe = run.recipe
    results = run.epoch(epoch).evals if epoch >= 0 else {}
    spread = run.epoch(epoch).uncertainty if epoch >= 0 else {}
    bootstrap = run.epoch(epoch).bootstrap if epoch >= 0 else {}
    inherited = base_model_license(recipe.model.name) if license is None else None
    chosen_license = license or inherited or "other"
    meta = card_metadata(run, results, model_name, adapter_only, license=chosen_license)
    selection = run.selected_by  # the metric fit picked the epoch by, a defaulted one included
    labels = None
    try:
        labels = json.loads((run.path / "model" / "config.json").read_text(encoding="utf-8")).get("id2label")
    except (OSError, json.JSONDecodeError):
        pass
    chosen = f"the best epoch by `{selection}`" if which == "best" and selection else ("the best epoch" if which == "best" else "the last epoch")

    base = recipe.model.name
    base_text = f"`{hub_id(base)}` (packaged as `{base}`)" if base.startswith("pkg:") and hub_id(base) else f"`{base}`"
    unfinished = run.unfinished
    lines = [
        "---",
        yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {model_name}" + (" (unfinished run)" if unfinished else ""),
        "",
        recipe.description,
        "",
        f"Fine-tuned from {base_text} with negtrain recipe `{run.recipe_name}`. "
        f"These weights are from epoch {epoch} ({chosen}) of run `{run.name}`.",
    ]
    if unfinished:
        lines += ["", f"**Unfinished run:** it {unfinished} (`trainer.max_epochs` is {recipe.trainer.max_epochs}) "
                  "before it stopped; these weights are not those of the recipe's full schedule."]
    if adapter_only:
        lines += ["", "This repository holds a LoRA adapter (peft); the base model is loaded separately."]
    elif merged:
        lines += ["", "The run's LoRA adapter is merged into the base weights: this is a plain transformers model."]
    if labels:
        lines += ["", "Labels: " + ", ".join(f"{k} = `{v}`" for k, v in sorted(labels.items(), key=lambda kv: int(kv[0]))) + "."]
    records = run.epoch(epoch).lines if epoch >= 0 else {}
    lines += ["", f"## Results (epoch {epoch})", "", "| benchmark | split | metric | value | ± stderr | 95% CI | baseline |", "|---|---|---|---|---|---|---|"]
    below = []
    for name, metrics in results.items():
        bench_name, _, split = name.partition("/")
        record = records.get(name) or {}
        top, scored_by = highest(record.get("baseline")), (record.get("baseline") or {}).get("metric")
        if at_or_below(record):
            below.append(name)
        for key, value in metrics.items():
            entry = spread.get(name, {}).get(key)
            value_cell = _fmt(value, key, name) + (" **≤ baseline**" if key == scored_by and name in below else "")
            baseline_cell = f"{top[1]:.4f} ({top[0]})" if top is not None and key == scored_by else ""
            lines.append(f"| {bench_name} | {split} | {key} | {value_cell} | {format_stderr(entry) or '-'} | {format_interval(entry) or '-'} | {baseline_cell} |")
    if below:
        lines += ["", f"**At or below baseline:** on {', '.join(below)} this model does no better than the best constant "
                  "prediction or chance (the baseline column), so those numbers say nothing about negation."]
    lines += ["", "Metrics are scored as each benchmark's paper defines them; `-` marks a metric that was undefined "
              "(e.g. no complete contrast set was evaluated). baseline: the higher of majority (the score of the best "
              "constant prediction on the same examples) and chance (uniform guessing), beside the metric it applies to."]
    links = {name.split("/")[0]: link for name in results if (b := _benchmark(name.split("/")[0])) is not None
             and _dataset_id(b, name.split("/")[1]) is None and (link := _dataset_link(b, name.split("/")[1]))}
    if links:
        lines += ["", "Data, as its authors published it: " + ", ".join(f"[{k}]({v})" for k, v in links.items()) + "."]
    if bootstrap:
        units = "; ".join(f"{name}: {b['units']} {b['unit']}s" for name, b in bootstrap.items())
        lines += ["", "The standard error of a per-item mean is lm-evaluation-harness's (sample standard deviation / √n); "
                  "other metrics' come from the bootstrap. The 95% CI is a percentile bootstrap "
                  f"({next(iter(bootstrap.values()))['resamples']} resamples) that draws each benchmark's independent "
                  f"units, so the members of a contrast set are resampled together ({units})."]
    evaluated = len([ep for ep in run.epochs if ep.evals])
    if which == "best" and selection and run.selection_split in results and evaluated > 1:
        lines += ["", f"**{selection_bias_note(selection, evaluated)}**"]
    if which == "best" and run.selected_on_test:
        lines += ["", f"**Selected on test:** the epoch was picked by `{selection}` on a test split (selection.allow_test_split)."]
    lines += ["", "## Usage", "", "```python"]
    if adapter_only:
        lines += [
            "from peft import PeftModel",
            "from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer",
            "",
            f'repo = "{model_name}"',
            'config = AutoConfig.from_pretrained(repo, subfolder="base_config")  # the head\'s id2label',
            f'base = AutoModelForSequenceClassification.from_pretrained("{hub_id(base) or base}", config=config)',
            "model = PeftModel.from_pretrained(base, repo)",
            "tokenizer = AutoTokenizer.from_pretrained(repo)",
        ]
    else:
        lines += [
            "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
            "",
            f'model = AutoModelForSequenceClassification.from_pretrained("{model_name}")',
            f'tokenizer = AutoTokenizer.from_pretrained("{model_name}")',
        ]
    lines += [
        'inputs = tokenizer("The cat is not asleep.", "The cat is asleep.", return_tensors="pt")',
        "print(model.config.id2label[model(**inputs).logits.argmax(-1).item()])",
        "```",
        "",
        "## Training",
        "",
        "Produced by:",
        "",
        "```bash",
        run.command or f"python -m negtrain fit --recipe {run.recipe_name}  # (exact command not recorded)",
        "```",
        "",
        "The resolved recipe (every default filled in) is `negtrain_recipe.yaml`:",
        "",
        "```yaml",
        run.recipe_text.rstrip(),
        "```",
        "",
        *provenance.markdown(provenance.read(run.path)),
        "## Citations",
        "",
    ]
    for name in results:
        bench = _benchmark(name.split("/")[0])
        citation = getattr(bench, "citation", None) if bench is not None else None
        line = f"- **{name.split('/')[0]}**: {citation}" if citation else f"- **{name.split('/')[0]}**"
        if line not in lines:
            lines.append(line)
    if license:
        note = f"`{license}`, as given to negtrain export/push."
    elif inherited:
        note = f"`{inherited}`, inherited from the base model `{recipe.model.name}` (its model card)."
    else:
        note = "Not known (`license: other`): set the license of the weights before publishing (`--license`)."
    # Every benchmark the card reports, by its Hub id or its name (its link is in Results).
    datasets = ", ".join(f"`{d}`" for d in dict.fromkeys(
        [*meta.get("datasets", []), *(r["dataset"]["type"] for r in meta["model-index"][0]["results"])]))
    lines += ["", "## License", "", note]
    if datasets:
        lines += ["", f"The training and evaluation data ({datasets}) carry their own licenses; check them too."]
    lines += [""]
    return redact_text("\n".join(lines))
