"""A report card's plan: the typed request (:class:`CardRequest`, built once from the command
line), the evaluation-only recipe it makes, and its :class:`CardPlan`, resolved once
(:func:`negtrain.evaluation.plan.resolve`) before any model is loaded or request sent, so an argument
mistake answers in a second."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from negtrain.core import labels as nli
from negtrain.benchmarks.matrix import check_supported, scorable, trained_splits
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark
from negtrain.config import (
    FAMILY_PICK,
    FAMILY_SECTIONS,
    DEFAULT_BACKEND,
    backend_row,
    check_backend,
    families_where,
    family_of,
    family_section,
    load_yaml,
    validate_recipe,
    without_other_families,
)
from negtrain.core.errors import ConfigError, unknown_name
from negtrain.models.sources import PKG_PREFIX, resolve_model_name
from negtrain.evaluation.plan import EvalPlan, PlanRequest, head_cannot_score, resolve
from negtrain.recipes import apply_overrides, parse_overrides
from negtrain.core.secrets import key_name_problem, redact_text, remember_secret
from negtrain.core.server_settings import flagged

__all__ = ["CardPlan", "CardRequest", "card_recipe", "check_model_exists", "default_out", "family_from_config",
           "head_cannot_score", "plan_card", "run_head_labels"]

@dataclass(frozen=True)
class CardRequest:
    """What ``evaluate --model`` asks, typed; built once from the command line."""

    model: str
    family: str | None = None
    adapter: str | None = None
    benchmarks: str = "all"
    shots: int | Literal["paper"] = 0
    strategy: str | None = None
    protocol: str | None = None
    chat: bool = False
    system: str | None = None
    fewshot_as_multiturn: bool = False
    log_samples: bool = True
    truncate: str | None = None
    out: Path | None = None
    strict: bool = False
    backend: str = DEFAULT_BACKEND
    #: The server settings given on the command line (``ServerConfig`` field names), unset ones left
    #: out, as given (``extra_body``: its JSON text).
    server: dict[str, Any] = field(default_factory=dict)
    allow_missing: bool = False
    cache: Path | None = None
    bootstrap: int | None = None
    bootstrap_seed: int | None = None
    #: Recipe overrides (``--trainer.devices=2``), as given.
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class CardPlan:
    """A card, planned: the resolved evaluation (with what was skipped), the checkpoint to load,
    the protocol it runs, the name shown for the model (a token in it masked) and the card's
    directory."""

    request: CardRequest
    plan: EvalPlan
    checkpoint: Path | None
    protocol: Any
    shown: str
    out: Path


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
            return [n for n in names if n]  # every one is a label (all(names)): typed as such
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        pass  # a run from before model/ was written, or a damaged one: its training data decides
    train = (run_recipe.get("data") or {}).get("train") or []
    sizes = [len(BENCHMARKS[t["benchmark"]].labels) for t in train if isinstance(t, dict) and t.get("benchmark") in BENCHMARKS]
    if not sizes:
        return None
    return list(nli.NLI3 if 3 in sizes else nli.NLI2)




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
    if config is not None and len(found) == 1:
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


def run_trained(model: str) -> dict[str, list[str]]:
    """benchmark -> the splits the run at ``model`` trained on (none for a model that is not a run
    directory): the card scores such a benchmark on the split held out from them (NegNLI)."""
    source = _run_source(model)
    return trained_splits((load_yaml(source[0]).get("data") or {}).get("train") or []) if source is not None else {}


def card_recipe(
    model: str,
    family: str | None,
    *,
    benchmarks: str = "all",
    shots: int | str = 0,
    adapter: str | None = None,
    overrides: dict[str, Any] | None = None,
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
        if "head_labels" in family_section(family_of(model_section), f"evaluate --model {model}").model_fields and not model_section.get("head_labels"):
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
        data_eval = [{"benchmark": b, "split": s} for b, s in scorable(family, names, run_trained(model))]
    raw: dict[str, Any] = {
        "description": f"negation report card of {model} ({family})",
        "model": model_section,
        "adapter": adapter_section,
        "data": {"eval": data_eval, "eval_batch_size": 32},
        "trainer": {"precision": "auto", "enable_progress_bar": False},
        "logger": "none",
    }
    if shots:
        if not family_section(family, "--shots").reads_prompts:
            raise ConfigError(f"--shots: few-shot prompts are for the {' and '.join(families_where('reads_prompts'))} families, not '{family}'")
        raw["data"]["shots"] = shots  # spread over the entries once `all` is expanded, below
    if overrides:

        raw = apply_overrides(raw, overrides)
    return raw, checkpoint



def default_out(model: str, family: str | None) -> Path:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model.rstrip("/")).name or model).strip("_") or "model"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    kind = re.sub(r"[^A-Za-z0-9._-]+", "_", family or "run").strip("._") or "run"  # never a path of its own
    return Path("cards") / f"{stem}-{kind}-{stamp}"



def _llm_settings(raw: dict[str, Any], request: CardRequest) -> None:
    """--chat, --system, --fewshot-as-multiturn, --no-log-samples, --bootstrap, --bootstrap-seed and
    --truncate into the raw recipe."""
    if (request.system is not None or request.fewshot_as_multiturn) and not request.chat:
        raise ConfigError("--system and --fewshot-as-multiturn shape a chat prompt; add --chat")
    if request.chat:
        if not family_section(family_of(raw["model"]), "--chat").reads_prompts:
            raise ConfigError(f"--chat: chat templates are for the {' and '.join(families_where('reads_prompts'))} families, not '{raw['model'].get('family')}'")
        raw["model"].update({"chat": True, "system": request.system, "fewshot_as_multiturn": request.fewshot_as_multiturn})
    if not request.log_samples:
        raw.setdefault("evaluation", {})["log_samples"] = False
    for key in ("bootstrap", "bootstrap_seed", "truncate"):
        if getattr(request, key) is not None:
            raw.setdefault("evaluation", {})[key] = getattr(request, key)


def _server_section(request: CardRequest) -> dict[str, Any] | None:
    backend = request.backend or DEFAULT_BACKEND
    row = backend_row(backend)
    given = {k: v for k, v in request.server.items() if v is not None}
    if row.loads_here:
        if given:
            raise ConfigError(f"{', '.join(s.option for s in flagged() if s.name in given)} go with --backend openai "
                              f"(the {backend} backend sends no request body: it loads the model in this process)")
        return None
    if not given.get("base_url"):
        if not row.needs_server:  # a registered backend that reads no server
            sent = [s.option for s in flagged() if s.name in given and s.name.startswith("extra_body")]
            if sent:
                raise ConfigError(f"{', '.join(sent)}: the {backend} backend sends no request body, so it would be ignored; "
                                  "it goes with --backend openai")
            return None
        raise ConfigError(f"--backend {backend} needs --base-url (the server's API root, e.g. http://127.0.0.1:8000/v1)")
    server: dict[str, Any] = {"base_url": given["base_url"], "allow_missing": request.allow_missing}
    server.update((k, v) for k, v in given.items() if k not in ("base_url", "extra_body"))
    if "extra_body" in given:
        server["extra_body"] = _json_object(given["extra_body"])
    if given.get("key_env") and (problem := key_name_problem(given["key_env"], "--api-key-env")):
        raise ConfigError(problem)
    if given.get("key_env"):
        # Known before anything is written (the lock file, the recipe): masked wherever it would appear.
        remember_secret(os.environ.get(given["key_env"]) or "")
    return server


def _json_object(text: str) -> dict[str, Any]:
    def not_json(constant: str) -> Any:
        raise ConfigError(f"--extra-body: {constant} is not JSON (a NaN or an infinity); give a number")

    try:
        extra = json.loads(text, parse_constant=not_json)
    except RecursionError:
        raise ConfigError("--extra-body: nested too deep") from None
    except ValueError as exc:
        raise ConfigError(f"--extra-body: not JSON ({exc})") from exc
    if not isinstance(extra, dict):
        raise ConfigError(f"--extra-body: a JSON object of request fields, e.g. '{{\"repeat_penalty\": 1.0}}', not {text!r}")
    return extra


def plan_card(request: CardRequest) -> CardPlan:
    """The card's resolved recipe, the benchmarks skipped (with why), and the checkpoint: found in
    seconds, before any model is loaded or request sent."""
    overrides = parse_overrides(list(request.overrides))
    backend = check_backend(request.backend or DEFAULT_BACKEND)
    here = backend_row(backend).loads_here
    family = request.family
    if not here:
        served = families_where("served")
        family = family or served[0]
        if family not in served:
            raise ConfigError(f"--backend {backend} scores a served decoder ({', '.join(served)}), not '{family}'")
        if _run_source(request.model) is not None or request.adapter is not None:
            raise ConfigError(f"--backend {backend}: --model is the served model's name; a run directory or adapter is loaded by --backend hf")
    else:
        check_model_exists(request.model)
    from negtrain.prompts.protocols import get_protocol

    protocol = get_protocol(request.protocol) if request.protocol else None
    raw, checkpoint = card_recipe(request.model, family, benchmarks=request.benchmarks, shots=0 if protocol else request.shots,
                                  adapter=request.adapter, overrides=overrides)
    if protocol is not None:
        from negtrain.evaluation.protocol import eval_entries

        raw["data"]["eval"] = eval_entries(protocol, request.chat)
    _llm_settings(raw, request)
    server = _server_section(request)
    if backend != DEFAULT_BACKEND:
        raw.setdefault("evaluation", {})
        raw["evaluation"] = {**raw["evaluation"], "backend": backend}
        if server is not None:
            raw["evaluation"]["server"] = {**server, **(raw["evaluation"].get("server") or {})}
        if not here and raw["evaluation"].get("truncate", "none") != "none":
            # Nothing here cuts a served prompt: refused rather than ignored.
            whole = ("a served model is sent every prompt whole, and the server's context decides" if server is not None
                     else f"the {backend} backend answers every prompt whole and cuts none")
            raise ConfigError(f"--truncate left: {whole}; drop --truncate, or score the model with --backend hf, which cuts them")
    shots = raw["data"].pop("shots", 0)
    where = "evaluate --model"
    recipe = validate_recipe(raw, where)
    if recipe.trainer.limit_val_batches == 0:  # fit's "no evaluation"; a card of nothing would print None
        raise ConfigError("--trainer.limit_val_batches=0: a report card would score no example; give a number of batches "
                          "(or a fraction) above 0, or drop it to score every example")
    served_model = not here
    # Resolved once, here, before any model is loaded: unsupported pairs and unreadable benchmarks
    # are found in seconds, and the skipped ones go into the card.
    plan = resolve(recipe, PlanRequest(
        strategy=request.strategy, shots=shots, named=request.benchmarks != "all",
        explicit=request.benchmarks != "all" or request.strict or protocol is not None, strict=request.strict, where=where,
        refusals=((lambda e: chat_not_applied(e, recipe)),) + (((lambda e: _through_server(e, recipe)),) if served_model else ()),
        # Drawn shots come from another split (ScoNe's and CondaQA's train): one that cannot be read
        # is skipped like unreadable data under `all`, and an error for a named benchmark.
        skip_unreadable_shots=True,
        trained=run_trained(request.model),
    ))
    plan.announce()
    shown = redact_text(request.model)  # a token inside a model path never reaches a title or header
    return CardPlan(request, plan, checkpoint, protocol, shown, request.out or default_out(shown, plan.family))


def chat_not_applied(entry, recipe) -> str | None:
    """--chat on a benchmark whose answers are scored by their log-likelihood after the benchmark's
    own context (multiple choice such as NeQA, cloze probes): no chat template shapes that context,
    on any backend, so the pair is refused before anything runs, in these words on every backend,
    rather than scored as written under a card that names a template."""
    from negtrain.models.prompting import AnswerMode, PromptSettings

    if not getattr(recipe.model, "chat", False):  # a family that reads no prompt has no --chat
        return None
    mode = PromptSettings.of(entry).answer_mode(get_benchmark(entry.benchmark))
    if mode not in (AnswerMode.CHOICES, AnswerMode.CLOZE):
        return None
    return (f"--chat: {entry.benchmark} is scored by the log-likelihood of its answers after its own context, "
            "which no chat template shapes; drop --chat, or score it in a card without --chat")


def _through_server(entry, recipe) -> str | None:
    from negtrain.evaluation.served import needs_logprobs, served_unsupported

    bench = get_benchmark(entry.benchmark)
    reason = served_unsupported(bench)
    if reason is None and needs_logprobs(bench, entry) and recipe.model.chat:
        reason = "scoring its labels needs prompt log-probabilities, which a chat endpoint does not give; drop --chat"
    return None if reason is None else f"not scored through a server: {reason}"
