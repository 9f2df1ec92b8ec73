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
an error instead); a benchmark named in ``--benchmarks`` must be readable. The same holds for the
split its shots come from.

A card survives a kill: benchmarks are scored one at a time and each is kept as soon as it is
done (``parts/<benchmark>-<split>.json``, after its predictions file), and the same command into
the same ``DIR`` continues from there; ``metrics.jsonl`` and the card are assembled from the parts.
``--backend openai`` (or any row of the backends table, :mod:`negtrain.config.backends`) scores a
served model instead of loading one (:mod:`negtrain.served`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from negtrain.benchmarks.matrix import Skipped, check_supported, resolve_benchmarks, scorable, unreadable_reason
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark
from negtrain.config import (
    FAMILY_PICK,
    IN_PROCESS,
    FAMILY_SECTIONS,
    RUN_ONLY_SERVER_SETTINGS,
    check_backend,
    families_where,
    family_of,
    load_yaml,
    validate_recipe,
    without_other_families,
)
from negtrain import labels as nli
from negtrain.errors import ConfigError, NegtrainError, Stopped, unknown_name
from negtrain.io.atomic import write_text
from negtrain.io.records import EvalRecord, RunRecord, read_records, write_records
from negtrain.io.run_lock import run_lock
from negtrain.metrics.declared import headline, with_role
from negtrain.metrics.uncertainty import format_interval
from negtrain.models.sources import PKG_PREFIX, resolve_model_name
from negtrain.paths import check_output_dir
from negtrain.recipes import LoadedRecipe, apply_overrides, parse_overrides, resolved_recipe_yaml
from negtrain.secrets import redact_text, remember_secret

# Lightning, torch and the training floor are imported where a card is scored or written: an
# argument mistake (a misspelt benchmark, a folder that does not exist) answers in a second.



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


def run_head_labels(run_dir: Path, run_recipe: dict[str, Any]) -> list[str] | None:
    """The classification head's labels a run trained, in head order: its ``model/config.json``'s
    ``id2label``, else the label space of its training data (as the run chose its fresh head)."""
    try:
        id2label = json.loads((run_dir / "model" / "config.json").read_text(encoding="utf-8")).get("id2label")
        names = [nli.normalize(id2label[key]) for key in sorted(id2label, key=int)]
        if names and all(names) and len(set(names)) == len(names):
            return names  # type: ignore[return-value]
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        pass  # a run from before model/ was written, or a damaged one: its training data decides
    train = (run_recipe.get("data") or {}).get("train") or []
    sizes = [len(BENCHMARKS[t["benchmark"]].labels) for t in train if isinstance(t, dict) and t.get("benchmark") in BENCHMARKS]
    if not sizes:
        return None
    return list(nli.NLI3 if 3 in sizes else nli.NLI2)


def head_cannot_score(head: list[str] | None, benchmark: str) -> str | None:
    """Why a classification head with labels ``head`` cannot be scored on ``benchmark``, or None:
    a 2-way head predicts no neutral/contradiction, so a 3-way benchmark scores it only where it
    has a binary view (NaN-NLI); a 3-way head is coarsened on 2-way benchmarks."""
    bench = BENCHMARKS[benchmark]
    if not head or not all(label in nli.NLI3 + nli.NLI2 for label in bench.labels):
        return None
    spaces = bench.prediction_spaces or (tuple(bench.labels),)
    if any(all(nli.into(h, space) is not None for h in head) for space in spaces):
        return None
    return (f"its labels are {', '.join(bench.labels)} and it has no 2-way view; the model's {len(head)}-way head "
            f"({', '.join(head)}) cannot tell neutral from contradiction")


def _looks_like_a_path(name: str) -> bool:
    """A name that can only be a folder or file, never a Hub id (``owner/name``)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or name.endswith(".ckpt") or (os.sep != "/" and os.sep in name)


def check_model_exists(model: str) -> None:
    """A model path that does not exist is a missing folder, said at once, not a Hub problem."""
    if model.startswith(PKG_PREFIX):
        resolve_model_name(model)  # raises: no such package or folder in it
        return
    path = Path(model).expanduser()
    if _looks_like_a_path(model) and not path.exists():
        parent = next((p for p in path.absolute().parents if p.exists()), None)
        where = f" ({parent} exists, {path.absolute().relative_to(parent).parts[0]} in it does not)" if parent and parent != Path(path.anchor) else ""
        raise ConfigError(f"--model {model}: no such folder{where}")


def _config_of(model: str) -> dict[str, Any] | None:
    folder = Path(resolve_model_name(model)).expanduser()
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def _families_of(config: dict[str, Any]) -> list[str]:
    """The families whose head a model config's ``architectures`` name: ``...ForSequenceClassification``
    is what ``AutoModelForSequenceClassification`` loads; an encoder-decoder's ``...ForConditionalGeneration``
    what ``AutoModelForSeq2SeqLM`` loads."""
    architectures = [a for a in config.get("architectures") or [] if isinstance(a, str)]
    found = []
    for name, section in FAMILY_SECTIONS.items():
        if not section.auto_class.startswith("AutoModelFor"):
            continue
        head = section.auto_class.removeprefix("AutoModel")
        if any(a.endswith(head) for a in architectures) or (
            head == "ForSeq2SeqLM" and config.get("is_encoder_decoder") and any(a.endswith("ForConditionalGeneration") for a in architectures)
        ):
            found.append(name)
    return found


def family_from_config(model: str) -> str | None:
    """The family of a local model folder, where its config.json says it unambiguously."""
    config = _config_of(model)
    found = _families_of(config) if config is not None else []
    if len(found) == 1:
        print(f"--family {found[0]}: from {model}'s config.json (architectures {', '.join(config['architectures'])})", flush=True)
        return found[0]
    return None


def _why_no_family(model: str) -> str:
    config = _config_of(model)
    if config is None:
        return ""
    found = _families_of(config)
    archs = ", ".join(map(str, config.get("architectures") or [])) or "none"
    if len(found) > 1:
        return f"; its config.json's architectures ({archs}) fit {', '.join(found)}"
    return f"; its config.json's architectures ({archs}) name no family's head"


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
        run_recipe = without_other_families(load_yaml(source[0]))  # a run from before the typed model section
        model_section = dict(run_recipe["model"])
        # A run's model.prompt was written for its own benchmark; the card puts every benchmark
        # to the model with that benchmark's default prompt.
        model_section.pop("prompt", None)
        adapter_section = dict(run_recipe.get("adapter") or {"type": "none"})
        if family is not None and family != family_of(model_section):
            raise ConfigError(f"--family {family}: the run at {model} trained a '{model_section.get('family')}' model")
        checkpoint = source[1]
        if "head_labels" in FAMILY_SECTIONS[family_of(model_section)].model_fields and not model_section.get("head_labels"):
            # The head the run trained: without it, a card's head would be sized to the card's
            # benchmarks (3-way with NaN-NLI among them) and the run's 2-way weights would not fit.
            model_section["head_labels"] = run_head_labels(source[0].parent, run_recipe)
    else:
        family = family or family_from_config(model)
        if family is None:
            raise ConfigError(f"evaluate --model needs --family ({FAMILY_PICK.expected()}){_why_no_family(model)}")
        model_section = {"name": model, "family": family}
        adapter_section = {"type": "none"}
    family = family_of(model_section)
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
        if not FAMILY_SECTIONS[family].reads_prompts:
            raise ConfigError(f"--shots: few-shot prompts are for the {' and '.join(families_where('reads_prompts'))} families, not '{family}'")
        raw["data"]["shots"] = shots  # spread over the entries once `all` is expanded, below
    if overrides:

        raw = apply_overrides(raw, overrides)
    return raw, checkpoint


def default_out(model: str, family: str | None) -> Path:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model.rstrip("/")).name or model).strip("_") or "model"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("cards") / f"{stem}-{family or 'run'}-{stamp}"


def _llm_settings(raw: dict[str, Any], args) -> None:
    """--chat, --system, --fewshot-as-multiturn, --no-log-samples, --bootstrap, --bootstrap-seed and
    --truncate into the raw recipe."""
    chat = getattr(args, "chat", False)
    system = getattr(args, "system", None)
    multiturn = getattr(args, "fewshot_as_multiturn", False)
    if (system is not None or multiturn) and not chat:
        raise ConfigError("--system and --fewshot-as-multiturn shape a chat prompt; add --chat")
    if chat:
        if not FAMILY_SECTIONS[family_of(raw["model"])].reads_prompts:
            raise ConfigError(f"--chat: chat templates are for the {' and '.join(families_where('reads_prompts'))} families, not '{raw['model'].get('family')}'")
        raw["model"].update({"chat": True, "system": system, "fewshot_as_multiturn": multiturn})
    if not getattr(args, "log_samples", True):
        raw.setdefault("evaluation", {})["log_samples"] = False
    for option, key in (("bootstrap", "bootstrap"), ("bootstrap_seed", "bootstrap_seed"), ("truncate", "truncate")):
        if getattr(args, option, None) is not None:
            raw.setdefault("evaluation", {})[key] = getattr(args, option)


def _apply_strategy(recipe, name: str, named: bool) -> None:
    """``--strategy NAME`` on every eval entry whose benchmark has it (``named``: the benchmarks
    were named, so each must have it)."""
    from negtrain.prompts.strategies import get_strategy, strategies

    applied = 0
    for entry in recipe.data.eval:
        if name not in strategies(entry.benchmark):
            if named and not get_benchmark(entry.benchmark).answer_type.builds_own_context:
                get_strategy(entry.benchmark, name)  # raises: no such strategy (did you mean)
            continue
        entry.strategy, entry.prompt, entry.verbalizer = name, None, None
        applied += 1
    if not applied:
        raise ConfigError(f"--strategy {name}: no benchmark of the card has a strategy of that name (see evaluate --list)")


def _server_section(args) -> dict[str, Any] | None:
    backend = getattr(args, "backend", IN_PROCESS) or IN_PROCESS
    if backend == IN_PROCESS:
        given = [f"--{n.replace('_', '-')}" for n in ("base_url", "api_key_env", "concurrency", "timeout", "retries", "max_requests",
                                                      "extra_body") if getattr(args, n, None) is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} go with --backend openai")
        return None
    if not args.base_url:
        if backend != "openai":  # a registered backend that reads no server
            return None
        raise ConfigError("--backend openai needs --base-url (the server's API root, e.g. http://127.0.0.1:8000/v1)")
    server: dict[str, Any] = {"base_url": args.base_url, "allow_missing": bool(args.allow_missing)}
    for name, key in (("api_key_env", "key_env"), ("concurrency", "concurrency"), ("timeout", "timeout"),
                      ("retries", "retries"), ("max_requests", "max_requests")):
        if getattr(args, name, None) is not None:
            server[key] = getattr(args, name)
    if getattr(args, "extra_body", None) is not None:
        try:
            extra = json.loads(args.extra_body)
        except ValueError as exc:
            raise ConfigError(f"--extra-body: not JSON ({exc})") from exc
        if not isinstance(extra, dict):
            raise ConfigError(f"--extra-body: a JSON object of request fields, e.g. '{{\"repeat_penalty\": 1.0}}', not {args.extra_body!r}")
        server["extra_body"] = extra
    if getattr(args, "api_key_env", None):
        # Known before anything is written (the lock file, the recipe): masked wherever it would appear.
        remember_secret(os.environ.get(args.api_key_env) or "")
    return server


def _skip_or_refuse(entries, skipped, explicit: bool, why, where: str) -> list:
    """Drop the entries ``why(entry)`` gives a reason for: listed in ``skipped`` under ``all``, an
    error when the benchmark was named."""
    kept = []
    for entry in entries:
        reason = why(entry)
        if reason is None:
            kept.append(entry)
        elif explicit:
            raise ConfigError(f"{where}: --benchmarks {entry.benchmark}: {reason}")
        else:
            print(f"all: skipping {entry.benchmark}/{entry.split}: {reason}", flush=True)
            skipped.append(Skipped(entry.benchmark, entry.split, reason))
    if not kept:
        raise ConfigError(f"{where}: no benchmark is left to score")
    return kept


def plan_card(args, extra: list[str]):
    """The card's resolved recipe, the benchmarks skipped (with why), and the checkpoint: found in
    seconds, before any model is loaded or request sent."""
    overrides = parse_overrides(extra)
    backend = check_backend(getattr(args, "backend", IN_PROCESS) or IN_PROCESS)
    family = args.family
    if backend != IN_PROCESS:
        served = families_where("served")
        family = family or served[0]
        if family not in served:
            raise ConfigError(f"--backend {backend} scores a served decoder ({', '.join(served)}), not '{family}'")
        if _run_source(args.model) is not None or args.adapter is not None:
            raise ConfigError(f"--backend {backend}: --model is the served model's name; a run directory or adapter is loaded by --backend hf")
    else:
        check_model_exists(args.model)
    from negtrain.prompts.protocols import get_protocol

    protocol = get_protocol(args.protocol) if getattr(args, "protocol", None) else None
    raw, checkpoint = card_recipe(args.model, family, args.benchmarks, 0 if protocol else args.shots, args.adapter, overrides)
    if protocol is not None:
        from negtrain.protocol import eval_entries

        raw["data"]["eval"] = eval_entries(protocol, getattr(args, "chat", False))
    _llm_settings(raw, args)
    server = _server_section(args)
    if backend != IN_PROCESS:
        raw.setdefault("evaluation", {})
        raw["evaluation"] = {**raw["evaluation"], "backend": backend}
        if server is not None:
            raw["evaluation"]["server"] = {**server, **(raw["evaluation"].get("server") or {})}
        if raw["evaluation"].get("truncate", "none") != "none":
            # Nothing here cuts a served prompt: refused rather than ignored.
            raise ConfigError("--truncate left: a served model is sent every prompt whole, and the server's context decides; "
                              "drop --truncate, or score the model here (--backend hf)")
    shots = raw["data"].pop("shots", 0)
    where = "evaluate --model"
    recipe = validate_recipe(raw, where)
    # Resolved here, before any model is loaded: unsupported pairs and unreadable benchmarks are
    # found in seconds, and the skipped ones go into the card.
    try:
        skipped = resolve_benchmarks(recipe)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    if skipped and args.strict:
        raise ConfigError(
            f"{where} --strict: cannot read " + "; ".join(f"{s.benchmark}/{s.split} ({s.reason})" for s in skipped)
        )
    strategy = getattr(args, "strategy", None)
    if strategy:
        _apply_strategy(recipe, strategy, named=args.benchmarks != "all")
    explicit = args.benchmarks != "all" or args.strict or protocol is not None
    head = [nli.normalize(h) or h for h in getattr(recipe.model, "head_labels", None) or []]
    if head:
        recipe.data.eval = _skip_or_refuse(recipe.data.eval, skipped, explicit, lambda e: head_cannot_score(head, e.benchmark), where)
    if recipe.evaluation.backend != IN_PROCESS:
        recipe.data.eval = _skip_or_refuse(recipe.data.eval, skipped, explicit,
                                           lambda e: _through_server(e, recipe), where)
    if shots:
        for entry in recipe.data.eval:
            # Multiple choice and cloze probes build their own context: no prompt to put shots in.
            if not get_benchmark(entry.benchmark).answer_type.builds_own_context:
                entry.shots = shots
    if shots or strategy:
        try:
            resolve_benchmarks(recipe, announce=False)  # fills each entry's shots_split, the strategy's verbalizer
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
    # Drawn shots come from another split (ScoNe's and CondaQA's train): one that cannot be read
    # is skipped like unreadable data under `all`, and an error for a named benchmark.
    recipe.data.eval = _skip_or_refuse(recipe.data.eval, skipped, explicit, _unreadable_shots, where)
    return recipe, skipped, checkpoint, protocol


def _through_server(entry, recipe) -> str | None:
    from negtrain.served import needs_logprobs, served_unsupported

    bench = get_benchmark(entry.benchmark)
    reason = served_unsupported(bench)
    if reason is None and needs_logprobs(bench, entry) and recipe.model.chat:
        reason = "scoring its labels needs prompt log-probabilities, which a chat endpoint does not give; drop --chat"
    return None if reason is None else f"not scored through a server: {reason}"


def _unreadable_shots(entry) -> str | None:
    if not isinstance(entry.shots, int) or not entry.shots or not entry.shots_split or entry.shots_split == entry.split:
        return None
    reason = unreadable_reason(get_benchmark(entry.benchmark), entry.shots_split)
    return None if reason is None else f"its shot source {entry.benchmark}/{entry.shots_split} cannot be read: {reason}"


# ---- the card's directory: written benchmark by benchmark, continued by a rerun ---------------

#: Finished benchmarks: ``parts/<benchmark>-<split>.json``, each the benchmark's metrics line,
#: written (atomically) after its predictions file. ``metrics.jsonl`` is assembled from them.
PARTS = "parts"
#: The note that the model's head was partly fresh (its numbers chance level), in ``parts/``.
FRESH_HEAD_NOTE = "fresh-head-note.txt"
#: What a card's user runs instead of scoring a fresh head: evaluate takes no --checkpoint.
FRESH_HEAD_REMEDY = ("give --model a trained negtrain run directory (or a .ckpt in it), or a model whose "
                     "classification head was trained for the task")


def set_name(entry) -> str:
    """The eval set's name of a recipe entry: ``benchmark/split``, ``/variant`` for a protocol's."""
    return f"{entry.benchmark}/{entry.split}" + (f"/{entry.variant}" if getattr(entry, "variant", None) else "")


def part_path(out: Path, name: str) -> Path:
    return out / PARTS / (name.replace("/", "-") + ".json")


def _identity(recipe_text: str) -> Any:
    """What must match for a rerun to continue a card: the resolved recipe, less the settings
    that only change how it runs (a larger --max-requests continues a card stopped by its budget)."""
    data = yaml.safe_load(recipe_text.split("\n", 1)[1])
    server = (data.get("evaluation") or {}).get("server") or {}
    for key in RUN_ONLY_SERVER_SETTINGS:
        server.pop(key, None)
    return data


def _open_card_dir(out: Path, recipe_text: str) -> bool:
    """Create ``out`` with its recipe.yaml, or check that it holds this same card; True when
    continuing one."""
    recipe_file = out / "recipe.yaml"
    if recipe_file.is_file():
        try:
            same = _identity(recipe_file.read_text(encoding="utf-8")) == _identity(recipe_text)
        except (yaml.YAMLError, AttributeError, IndexError, UnicodeDecodeError):
            same = False
        if not same:
            raise ConfigError(
                f"--out {out} holds another card or run (its recipe.yaml differs from this command's); "
                "choose another directory, or rerun the exact command that started it to continue it"
            )
        return True
    if (out / "metrics.jsonl").exists():
        raise ConfigError(f"--out {out} already holds results (metrics.jsonl); choose another directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the card's directory ({exc.strerror or exc})") from exc
    write_text(recipe_file, recipe_text)
    return False


def _keep_part(out: Path, name: str, folder: Path, records: list[RunRecord]) -> None:
    """A benchmark scored by the hf backend into ``folder``: its predictions file moves into the
    card, then its metrics line (``records``, as the recorder handed them on) becomes its part
    (the part is what marks it finished)."""
    for file in (folder / "predictions").glob("*.jsonl"):
        (out / "predictions").mkdir(exist_ok=True)
        os.replace(file, out / "predictions" / file.name)
    write_records(part_path(out, name), records[-1:])
    shutil.rmtree(folder, ignore_errors=True)


def _staging(out: Path, name: str) -> Path:
    folder = out / PARTS / (".scoring-" + name.replace("/", "-"))
    shutil.rmtree(folder, ignore_errors=True)  # what a killed attempt left
    folder.mkdir(parents=True)
    return folder


def _lightning_rank() -> int:
    from lightning.pytorch.utilities.rank_zero import rank_zero_only

    return rank_zero_only.rank


def make_card(args, extra: list[str]) -> Path:
    recipe, skipped, checkpoint, protocol = plan_card(args, extra)
    shown = redact_text(args.model)  # a token inside a model path never reaches a title or header
    out = args.out or default_out(shown, recipe.model.family)
    check_output_dir(out, "--out")  # before the model loads: an unwritable --out fails at once
    loaded = LoadedRecipe(name=f"card:{shown}", path=Path("evaluate --model"), recipe=recipe)
    recipe_text = resolved_recipe_yaml(loaded)
    with run_lock(out):  # one writer: a second card into the same --out is refused, naming this one
        try:
            _write_card_dir(args, recipe, skipped, checkpoint, out, loaded, recipe_text, shown, protocol)
        except Stopped as stopped:  # never a success; the finished benchmarks and cached answers stay
            raise stopped.continue_with(f"the card in {out} keeps what it finished", "the same command") from stopped
    return out


def _write_card_dir(args, recipe, skipped, checkpoint, out: Path, loaded: LoadedRecipe, recipe_text: str, shown: str, protocol) -> None:
    served = recipe.evaluation.backend != IN_PROCESS
    # A served card runs in one process and imports no Lightning; the hf one may run under DDP,
    # where only rank zero writes the card's files.
    rank = 0 if served else _lightning_rank()
    entries = list(recipe.data.eval)
    if rank == 0:
        continuing = _open_card_dir(out, recipe_text)
    else:
        continuing = True
    todo = [e for e in entries if not part_path(out, set_name(e)).is_file()]
    if continuing and rank == 0:
        print(f"continuing the card in {out}: {len(entries) - len(todo)} of {len(entries)} benchmarks already scored", flush=True)
    if todo:
        if served:  # no tokenizer, weights or Trainer here: nothing of theirs to quiet
            _score_served(recipe, todo, out, args)
        else:
            from negtrain.training.run import evaluate_each, quiet_third_party_logs

            quiet_third_party_logs()
            partial = recipe.model_copy(deep=True)
            partial.data.eval = todo
            part_recipe = LoadedRecipe(name=loaded.name, path=loaded.path, recipe=partial)
            note = evaluate_each(part_recipe, checkpoint, lambda name: _staging(out, name), lambda name, folder, records: _keep_part(out, name, folder, records),
                                 provenance_of=loaded, provenance_dir=out, checkpoint_given_as=f"--model {shown}:",
                                 fresh_head_remedy=FRESH_HEAD_REMEDY,
                                 response_cache=Path(args.cache) if getattr(args, "cache", None) else out / "responses.sqlite")
            if note and rank == 0:  # kept, so the card of a continued run says it too
                write_text(out / PARTS / FRESH_HEAD_NOTE, note + "\n")
    if rank == 0:  # under DDP every rank returns here; one writes the card
        records = [r for e in entries for r in read_records(part_path(out, set_name(e)))]
        write_records(out / "metrics.jsonl", records)
        template = chat_template_line(recipe)
        fresh = out / PARTS / FRESH_HEAD_NOTE
        write_card(out, records, shown, recipe.model.family, skipped, template,
                   fresh.read_text(encoding="utf-8").strip() if fresh.is_file() else None)
        print(f"report card: {out / 'card.md'}, {out / 'card.png'}")
        if protocol is not None:
            from negtrain.protocol import write_protocol

            write_protocol(out, protocol, records, shown, recipe.evaluation.bootstrap, recipe.evaluation.bootstrap_seed)
            if template:  # under the title, so every table of the card says how its prompts were wrapped
                title, _, rest = (out / "protocol.md").read_text(encoding="utf-8").partition("\n")
                write_text(out / "protocol.md", f"{title}\n\n{template}\n{rest}")
            print(f"protocol {protocol.name}: {out / 'protocol.md'}")


def _score_served(recipe, todo, out: Path, args) -> None:
    from negtrain.served import needs_logprobs, score_served
    from negtrain.serving.backend import BackendContext, open_backend
    from negtrain.serving.cache import ResponseCache
    from negtrain.models import provenance

    server = recipe.evaluation.server
    allow_missing = server.allow_missing if server is not None else bool(getattr(args, "allow_missing", False))
    # A continued card adds this session to its provenance; a new one gets this one (write_resumed
    # writes the record whole where there is none yet).
    provenance.write_resumed(out, provenance.collect(recipe, "server", None, None))
    cache = ResponseCache(Path(args.cache) if getattr(args, "cache", None) else out / "responses.sqlite")
    try:
        backend = open_backend(recipe.evaluation.backend, BackendContext(recipe.model.name, server, cache, recipe))
    except BaseException:
        cache.close()
        raise
    need = [e for e in todo if needs_logprobs(get_benchmark(e.benchmark), e)]
    if need:
        ok, answer = backend.offers_prompt_logprobs()
        if not ok:
            can = [set_name(e) for e in todo if e not in need]
            where = f"the server at {backend.settings.api_root}" if hasattr(backend, "settings") else f"the backend {backend.name}"
            raise ConfigError(
                f"{where} returns no prompt log-probabilities (echo + logprobs on /v1/completions: {answer}); "
                f"{', '.join(set_name(e) for e in need)} need them; "
                + (f"these can run: --benchmarks {','.join(dict.fromkeys(c.split('/')[0] for c in can))}" if can else "no benchmark asked for can run without them")
            )
    try:
        for entry in todo:
            result = score_served(recipe, entry, backend, out, allow_missing=allow_missing)
            write_records(part_path(out, set_name(entry)), [result.record])
            c = result.counts
            print(f"{set_name(entry)}: {result.record['metrics'].get(headline(result.record['metrics']) or 'n')} "
                  f"({c.requests} requests sent, {c.cached} answered from the cache)", flush=True)
    finally:
        cache.close()


# ---- the card files ----------------------------------------------------------------------------


def chat_template_line(recipe) -> str | None:
    """Whether the prompts went through a chat template, as one line of the card's tables (None
    for a family that reads no prompt). Without ``--chat`` (``model.chat``) or a run's
    ``model.chat_template: true``, a prompt reaches the model as written."""
    model = recipe.model
    if not FAMILY_SECTIONS[model.family].reads_prompts:
        return None
    if recipe.evaluation.backend not in (IN_PROCESS, "openai"):
        return f"Chat template: whatever the {recipe.evaluation.backend} backend applies; prompts sent as written."
    if recipe.evaluation.backend == "openai":
        return ("Chat template: the server's, through /v1/chat/completions (--chat)." if model.chat
                else "Chat template: none; prompts as written, through /v1/completions (no --chat).")
    if model.chat:
        return "Chat template: the tokenizer's, applied to every prompt (--chat)."
    if model.wraps_in_chat_template():
        return "Chat template: the tokenizer's where it has one (the run's model.chat_template: true)."
    return "Chat template: none; prompts as written (no --chat)."


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def _with_ci(value: float | None, spread: dict | None) -> str:
    """The value with its ci95 when one was computed: ``0.8500 [0.8150, 0.9000]``."""
    interval = format_interval(spread)
    return _fmt(value) + (f" {interval}" if interval and _fmt(value) != "-" else "")


#: A benchmark's scores that rest on less than this part of its items show how many, beside them.
SMALL_PART = 0.5


def scored_count(metrics: dict) -> float | None:
    """The items a benchmark's scores rest on, where that can be fewer than it loaded (``n``): its
    count of scored probes, else ``n`` less the items it skipped; None where every item is scored."""
    if metrics.get("n_probes") is not None:
        return metrics["n_probes"]
    if metrics.get("n_skipped") is not None and metrics.get("n") is not None:
        return metrics["n"] - metrics["n_skipped"]
    return None


def card_markdown(records: list[RunRecord], model: str, family: str, skipped, record: dict | None = None,
                  template: str | None = None, fresh_head: str | None = None) -> str:
    """``record``: the card's provenance (:mod:`negtrain.models.provenance`), shown at the end;
    ``template``: whether the prompts went through a chat template (:func:`chat_template_line`)."""
    from negtrain.models import provenance

    evals = [r for r in records if isinstance(r, EvalRecord)]
    columns: list[str] = []
    for r in evals:
        columns += [k for k in with_role(r["metrics"], "consistency") if k not in columns]
    lines = [f"# Negation report card: `{model}` ({family})", ""] + ([template, ""] if template else [])
    if fresh_head:  # before the numbers it qualifies
        said = fresh_head.removeprefix("note: ")
        lines += [f"**Chance level.** {said[0].upper() + said[1:]}.", ""]
    lines.append("| benchmark | split | accuracy | " + " | ".join(columns) + (" | " if columns else "") + "n | seconds | examples/s | tokens generated |")
    lines.append("|---|---|---|" + "---|" * len(columns) + "---|---|---|---|")
    notes = []
    units: list[str] = []
    for r in evals:
        m = r["metrics"]
        spread = r.get("uncertainty") or {}
        acc = headline(m)
        acc_cell = "-" if acc is None else _with_ci(m[acc], spread.get(acc)) + ("" if acc == "accuracy" else f" ({acc})")
        n = m.get("n")
        scored = scored_count(m)
        if scored is not None and n and scored < SMALL_PART * n:
            # e.g. negated LAMA's probes a model's vocabulary can answer: 1 of 2,224 is no benchmark score
            acc_cell += f" (on {int(scored):,} of {int(n):,})"
            notes.append(f"- {r['benchmark']}/{r['split']}: its scores rest on {int(scored):,} of its {int(n):,} items "
                         "(the others were not scored; see n_skipped)")
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
        if m.get("n_truncated") is not None:
            notes.append(f"- {name}/{r['split']}: n_truncated {int(m['n_truncated'])} of {int(n) if n is not None else '-'} "
                         "(prompts cut from the start to fit the model's context, --truncate left)")
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
    served = [r for r in evals if r.get("requests")]
    if served:
        lines += ["", "## Requests", "", "Per benchmark, the requests it took to the server (answers from the response cache included):", "",
                  "| benchmark | split | requests | tokens in | tokens out |", "|---|---|---|---|---|"]
        for r in served:
            q = r["requests"]
            lines.append(f"| {r['benchmark']} | {r['split']} | {q['sent'] + q['cached']} | {q['tokens_in']} | {q['tokens_out']} |")
    missing = [(r, m) for r in evals for m in r.get("missing", [])]
    if missing:
        lines += ["", "## Missing", "", "Requests that failed after their retries (--allow-missing); their examples are not scored:", ""]
        lines += [f"- {m}" for _, m in missing]
    if skipped:
        lines += ["", "## Skipped", ""]
        lines += [f"- {s.benchmark}/{s.split}: {s.reason}" for s in skipped]
    if notes:
        lines += ["", "## Notes", "", *notes]
    lines += ["", "Predictions: `predictions/`; every number above is what `negtrain evaluate --predictions` gives on those files.", ""]
    lines += provenance.markdown(record, file_table=False)  # the data files' hashes: provenance.json
    return "\n".join(lines)


def plot_card(records: list[RunRecord], path: Path, title: str) -> list[str]:
    """Accuracy (x) against the headline consistency (y), one numbered point per benchmark, and
    under the plot a key from each number to the benchmark and its two values. Points closer than
    :data:`SAME_SPOT` share one label (``1, 2, 5``), so labels never pile onto each other (a
    protocol card's variants often score the same). The PNG's ``negtrain:points`` text chunk names
    the benchmarks drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = []
    for r in records:
        if not isinstance(r, EvalRecord):
            continue
        m = r["metrics"]
        acc, cons = headline(m), with_role(m, "consistency")
        if acc is None or not cons or m.get(acc) is None or m.get(cons[0]) is None:
            continue
        name = f"{r['benchmark']}/{r['split']}" + (f"/{r['variant']}" if r.get("variant") else "")
        points.append((name, acc, cons[0], float(m[acc]), float(m[cons[0]])))
    spots: list[list[int]] = []  # each: the points within SAME_SPOT of its first one
    for i, (*_, x, y) in enumerate(points):
        near = next((g for g in spots if abs(points[g[0]][3] - x) < SAME_SPOT and abs(points[g[0]][4] - y) < SAME_SPOT), None)
        if near is None:
            spots.append([i])
        else:
            near.append(i)
    key_rows = max(len(points), 1)
    fig, (ax, key) = plt.subplots(2, 1, figsize=(6, 5 + 0.17 * key_rows),
                                  gridspec_kw={"height_ratios": [5, 0.17 * key_rows + 0.2]})
    for members in spots:
        xs, ys = [points[i][3] for i in members], [points[i][4] for i in members]
        ax.scatter(xs, ys, s=30)
        numbers = [str(i + 1) for i in members]
        label = "\n".join(", ".join(numbers[k:k + 6]) for k in range(0, len(numbers), 6))
        ax.annotate(label, (sum(xs) / len(xs), sum(ys) / len(ys)), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.plot([0, 1], [0, 1], ":", color="grey", linewidth=0.8)  # consistency can never exceed accuracy much
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("accuracy (NaN-NLI: F1)")
    ax.set_ylabel("consistency (all of a contrast group right)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    key.axis("off")
    lines = [f"{i + 1:>2}  {name}: {acc} {x:.3f}, {cons} {y:.3f}" for i, (name, acc, cons, x, y) in enumerate(points)]
    key.text(0, 1, "\n".join(lines) or "(no benchmark has both an accuracy and a consistency)", family="monospace",
             fontsize=7, va="top", ha="left", transform=key.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"negtrain:points": ",".join(p[0] for p in points)})
    plt.close(fig)
    return [p[0] for p in points]


#: Points of card.png closer than this (in accuracy and in consistency) share one label.
SAME_SPOT = 0.04


def write_card(out: Path, records: list[RunRecord], model: str, family: str, skipped, template: str | None = None,
               fresh_head: str | None = None) -> None:
    """card.md and card.png from the card's records (what its metrics.jsonl holds, as just written)."""
    from negtrain.models import provenance

    records = [r for r in records if r.stage == "validate"]
    if not records:
        raise NegtrainError(f"{out / 'metrics.jsonl'}: no evaluation was recorded")
    write_text(out / "card.md", card_markdown(records, model, family, skipped, provenance.read(out), template, fresh_head))
    plot_card(records, out / "card.png", f"{model} ({family})")
