"""Running a planned report card: its directory is written benchmark by benchmark (each kept as
soon as it is scored, ``parts/<benchmark>-<split>.json`` after its predictions file), so the same
command into the same ``--out`` continues a killed card; ``metrics.jsonl``, the card and a
protocol's table are then made from the records, the ones scored in this process handed on in
memory and only those an earlier process kept read from their parts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from collections.abc import Callable
from typing import Any

import yaml

from negtrain.benchmarks.registry import get_benchmark
from negtrain.evaluation.card_plan import CardPlan, CardRequest, plan_card
from negtrain.evaluation.card_render import chat_template_line, write_card
from negtrain.evaluation.card_run_data import run_data_lines
from negtrain.config import FAMILY_SECTIONS, RUN_ONLY_SERVER_SETTINGS, EvalConfig, backend_row, eval_set_name, loads_here
from negtrain.core.errors import ConfigError, NegtrainError, Stopped
from negtrain.io.atomic import write_text
from negtrain.io.records import EvalRecord, RunRecord, read_records, write_records
from negtrain.io.run_lock import run_lock
from negtrain.metrics.declared import headline
from negtrain.core.paths import check_output_dir
from negtrain.core.process_rank import process_rank
from negtrain.recipes import LoadedRecipe, resolved_recipe_yaml

# Lightning, torch and the training floor are imported where a card is scored: an argument
# mistake (a misspelt benchmark, a folder that does not exist) answers in a second.


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
    return eval_set_name(entry.benchmark, entry.split, getattr(entry, "variant", None))


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
    card, then its metrics line (``records``, as the recorder handed them on) becomes its part (the
    part is what marks it finished)."""
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


#: Scores a card's benchmarks with a classifier or masked LM loaded in this process: the training
#: floor's ``score_in_process`` (Lightning's validate loop, one set at a time), with
#: ``evaluate_each``'s arguments. evaluation/ never imports training, so the command hands it in.
InProcessScorer = Callable[..., "str | None"]


def through_engine(recipe) -> bool:
    """Whether a card's benchmarks are requests answered by its backend (every language-model
    family, on every backend), rather than a classifier's or masked LM's Lightning ``predict``."""
    return not loads_here(recipe.evaluation.backend) or FAMILY_SECTIONS[recipe.model.family].reads_prompts


def make_card(request: CardRequest, in_process: InProcessScorer | None = None) -> Path:
    """Plan, score and write a report card. ``in_process`` scores a classifier's or masked LM's
    benchmarks (the ``evaluate`` command passes the training floor's, and only for those
    families); a language model's card needs none."""
    card = plan_card(request)
    out = card.out
    check_output_dir(out, "--out")  # before the model loads: an unwritable --out fails at once
    loaded = LoadedRecipe(name=f"card:{card.shown}", path=Path("evaluate --model"), recipe=card.plan.recipe)
    with run_lock(out):  # one writer: a second card into the same --out is refused, naming this one
        try:
            _write_card_dir(card, out, loaded, in_process)
        except Stopped as stopped:  # never a success; the finished benchmarks and cached answers stay
            raise stopped.continue_with(f"the card in {out} keeps what it finished", "the same command") from stopped
    return out


def _write_card_dir(card: CardPlan, out: Path, loaded: LoadedRecipe, in_process: InProcessScorer | None = None) -> None:
    recipe = card.plan.recipe
    served = through_engine(recipe)
    # A card answered through the engine runs in one process; a classifier's may run under DDP,
    # where only rank zero writes the card's files. The rank is the launcher's environment (as
    # Lightning reads it), so a card imports no Lightning to know it.
    rank = process_rank()
    if served and rank != 0:
        return  # launched under torchrun: rank zero answers every request
    entries: list[EvalConfig] = list(card.plan.evals)
    if rank == 0:
        continuing = _open_card_dir(out, resolved_recipe_yaml(loaded))
    else:
        continuing = True
    todo = [e for e in entries if not part_path(out, set_name(e)).is_file()]
    if continuing and rank == 0:
        print(f"continuing the card in {out}: {len(entries) - len(todo)} of {len(entries)} benchmarks already scored", flush=True)
    #: The records scored in this process, by set name: handed on, not read back.
    scored: dict[str, list[RunRecord]] = {}
    fresh_note = None
    if todo:
        if served:
            _score_served(card, todo, out, scored)
        else:
            if in_process is None:
                raise NegtrainError(f"backend {recipe.evaluation.backend} scores a {recipe.model.family} model through its module: make_card "
                                    "needs in_process= (negtrain.training.run.score_in_process, which the evaluate command hands in)")
            partial = card.plan.with_evals(todo)
            part_recipe = LoadedRecipe(name=loaded.name, path=loaded.path, recipe=partial.recipe)

            def keep(name: str, folder: Path, records: list[RunRecord]) -> None:
                _keep_part(out, name, folder, records)
                scored[name] = records[-1:]

            fresh_note = in_process(part_recipe, card.checkpoint, lambda name: _staging(out, name), keep,
                                       provenance_of=loaded, provenance_dir=out, checkpoint_given_as=f"--model {card.shown}:",
                                       fresh_head_remedy=FRESH_HEAD_REMEDY, plan=partial)
            if fresh_note and rank == 0:  # kept, so the card of a continued run says it too
                write_text(out / PARTS / FRESH_HEAD_NOTE, fresh_note + "\n")
    if rank == 0:  # under DDP every rank returns here; one writes the card
        records = [r for e in entries for r in scored.get(set_name(e)) or read_records(part_path(out, set_name(e)))]
        write_records(out / "metrics.jsonl", records)
        _write_card_files(card, out, records, fresh_note)


def _template_system(recipe) -> str | None:
    """Where the tokenizer's chat template shaped the prompts (--chat on a backend that applies the
    tokenizer's template: the model in this process) and adds a system message of its own, the
    card's words quoting it."""
    from negtrain.models.chat_template import system_note
    from negtrain.models.folder_checks import load_lm_tokenizer
    from negtrain.models.sources import resolve_model_name

    if not getattr(recipe.model, "chat", False) or backend_row(recipe.evaluation.backend).chat_template != "tokenizer":
        return None
    try:
        tokenizer = load_lm_tokenizer(resolve_model_name(recipe.model.name), recipe.model.name)
    except (ConfigError, OSError):  # the prompts were rendered with it; a tokenizer gone since says nothing
        return None
    return system_note(tokenizer, recipe.model)


def _write_card_files(card: CardPlan, out: Path, records: list[RunRecord], fresh_note: str | None) -> None:
    """card.md, card.png and a protocol's protocol.md, from the card's records."""
    evals = [r for r in records if isinstance(r, EvalRecord)]
    recipe, protocol = card.plan.recipe, card.protocol
    template = chat_template_line(recipe)
    own_system = _template_system(recipe)
    if template and own_system:
        template = f"{template} {own_system}"
    if fresh_note is None:  # a continued card: the note an earlier process kept
        fresh = out / PARTS / FRESH_HEAD_NOTE
        fresh_note = fresh.read_text(encoding="utf-8") if fresh.is_file() else None
    fresh_note = fresh_note.strip() if fresh_note else None
    about_run = run_data_lines(card.checkpoint, evals)  # selected on test, trained on the scored pairs, its selection split
    write_card(out, records, card.shown, recipe.model.family, list(card.plan.skipped), template=template, fresh_head=fresh_note,
               selected_on_test="\n\n".join(about_run.warnings) or None, run_notes=about_run.notes)
    print(f"report card: {out / 'card.md'}, {out / 'card.png'}")
    if protocol is not None:
        from negtrain.evaluation.protocol import write_protocol

        write_protocol(out, protocol, evals, card.shown, resamples=recipe.evaluation.bootstrap,
                       seed=recipe.evaluation.bootstrap_seed, template=template)
        print(f"protocol {protocol.name}: {out / 'protocol.md'}")


def _score_served(card: CardPlan, todo: list, out: Path, scored: dict[str, list[RunRecord]]) -> None:
    """Every entry of ``todo`` through the card's backend (the engine), each kept as soon as it is scored."""
    from negtrain.evaluation.served import needs_logprobs, score_served
    from negtrain.engine.entry_requests import entry_requests
    from negtrain.engine.prompts import prepare_all
    from negtrain.serving.backend import BackendContext, open_backend
    from negtrain.serving.cache import ResponseCache
    from negtrain.models import provenance

    recipe, request = card.plan.recipe, card.request
    server = recipe.evaluation.server
    allow_missing = server.allow_missing if server is not None else request.allow_missing
    here = loads_here(recipe.evaluation.backend)
    if here:  # transformers' and the tokenizers' chatter, as a Lightning card quiets it
        from negtrain.core.third_party_logs import quiet_model_logs

        quiet_model_logs()
        devices = recipe.trainer.devices
        if devices not in (1, "auto"):  # said, not silently ignored: the numbers are the same, the speed is not
            print(f"note: a language model's card answers its requests in one process, on one device; "
                  f"--trainer.devices={devices} applies to fit, validate and test", flush=True)
    cache = ResponseCache(request.cache or out / "responses.sqlite")
    try:
        backend = open_backend(recipe.evaluation.backend, BackendContext(recipe.model.name, server, cache, recipe, checkpoint=card.checkpoint))
    except BaseException:
        cache.close()
        raise
    need = [e for e in todo if needs_logprobs(get_benchmark(e.benchmark), e)]
    if need:
        ok, answer = backend.offers_prompt_logprobs()
        if not ok:
            can = [set_name(e) for e in todo if e not in need]
            raise ConfigError(
                f"{backend.where} {answer}; "
                f"{', '.join(set_name(e) for e in need)} need them; "
                + (f"these can run: --benchmarks {','.join(dict.fromkeys(c.split('/')[0] for c in can))}" if can else "no benchmark asked for can run without them")
            )
    try:
        # Every entry's prompts built and checked first, before a model here loads its weights:
        # one that does not fit fails in seconds.
        prepared = prepare_all(recipe, todo, backend)
        # ...and turned into requests (a chat template that refuses the conversation says so here).
        requests = {set_name(e): entry_requests(recipe, e, backend, prepared[set_name(e)]) for e in todo}
        backend.load()  # a model here loads its weights now (the backend defers them to here)
        # A continued card adds this session to its provenance; a new one gets this one
        # (write_resumed writes the record whole where there is none yet). A model in this process
        # is described by its config, checkpoint, precision and dtype; a served one by its server.
        precision = (backend.precision or "server") if backend.loads_here else "server"
        provenance.write_resumed(out, provenance.collect(recipe, precision, backend.model_config,
                                                         card.checkpoint if backend.loads_here else None, dtype=backend.dtype_words))
        for entry in todo:
            result = score_served(recipe, entry, backend, out, allow_missing=allow_missing, prepared=prepared[set_name(entry)],
                                  built=requests[set_name(entry)])
            write_records(part_path(out, set_name(entry)), [result.record])
            scored[set_name(entry)] = [result.record]
            c = result.counts
            print(f"{set_name(entry)}: {result.record['metrics'].get(headline(result.record['metrics']) or 'n')} "
                  f"({c.requests} requests {'answered' if here else 'sent'}, {c.cached} answered from the cache)", flush=True)
    finally:
        cache.close()


