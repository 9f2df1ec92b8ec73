"""``evaluate``: score a predictions file from any system on a benchmark split, list the benchmarks
and the scoring matrix, or (``--model``) write a model's negation report card (negtrain.evaluation.card)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from negtrain.commands import check_bootstrap
from negtrain.commands.view import command_for
from negtrain.core.card_settings import CARD_SETTINGS
from negtrain.core.errors import NegtrainError
from negtrain.core.server_settings import flagged


class FamilyChoices:
    """``--family``'s choices: the table of families (``negtrain.config.families``), read when
    argparse checks a value or prints them, so building the parser (every ``negtrain --help``)
    imports no pydantic, and a family registered before ``main`` runs is a choice."""

    def __contains__(self, name: object) -> bool:
        from negtrain.config import families

        return name in families()

    def __iter__(self):
        from negtrain.config import families

        return iter(families())


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", help="a registered benchmark (see --list)")
    p.add_argument("--split", help="one of the benchmark's splits, or several (a,b,...: each scored, then mean ± std over them and pooled)")
    p.add_argument("--predictions", type=Path, action="append",
                   help='JSONL, one {"id": ..., "prediction": "<label>"} per line; once per split, in the order of --split')
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--allow-missing", action="store_true", help="score only the predicted examples (the output says so)")
    # Unset (None) rather than 1000: a report card takes them into its recipe's `evaluation:`
    # section only when given, so an --evaluation.bootstrap override is not silently replaced.
    # Here, not in the card's group: a predictions file is scored with them too.
    for name in ("bootstrap", "bootstrap_seed"):
        p.add_argument(CARD_SETTINGS[name].option, **CARD_SETTINGS[name].argument())
    p.add_argument("--list", action="store_true", help="list the scoring matrix and the benchmarks, their splits, labels and metric names")
    card = p.add_argument_group("report card (any model, no recipe): --model NAME --family F")
    card.add_argument("--model", help="a Hub id, local folder, pkg:<package>/<dir>, or a negtrain run directory / .ckpt")
    # A metavar, so that argparse does not list the choices while it builds the parser.
    card.add_argument("--family", choices=FamilyChoices(), metavar="FAMILY",
                      help="the model family: %(choices)s (a run directory brings its own)")
    card.add_argument("--adapter", help="a trained peft adapter folder to load onto --model")
    card.add_argument("--benchmarks", default="all", help="'all' (default: every benchmark the family can score) or a,b,c")
    card.add_argument("--shots", type=shots_arg, default=0, metavar="K|paper",
                      help="few-shot examples per prompt (seq2seq / causal_lm): K drawn, or 'paper': the strategy's fixed demonstrations")
    card.add_argument("--strategy", help="a named prompt strategy of the benchmarks (see --list), e.g. conditional_q")
    card.add_argument("--protocol", help="run a paper's table: a named list of (benchmark, split, strategy, shots) variants, e.g. scone-icl")
    # One flag per recipe setting a card takes, with its description as help: the settings are
    # defined once (negtrain/core/card_settings.py), and the recipe's fields are made from them too.
    for name in ("chat", "system", "fewshot_as_multiturn", "log_samples", "truncate"):
        card.add_argument(CARD_SETTINGS[name].option, **CARD_SETTINGS[name].argument())
    card.add_argument("--out", type=Path, help="the card's directory (default: cards/<model>-<family>-<time>)")
    card.add_argument("--strict", action="store_true", help="a benchmark whose data cannot be read is an error, not a skip")
    served = p.add_argument_group("served model (--backend openai: --model is the served model's name)")
    # No default here: the backends table (negtrain/config/backends.py) says which it is, and the
    # parser is built without importing the config's schema.
    served.add_argument("--backend", metavar="NAME",
                        help="hf: load the model here and answer its requests, as fit's per-epoch evaluation does "
                             "(default); transformers: the same backend under lm-evaluation-harness's name; openai: an "
                             "OpenAI-compatible server at --base-url (docs: served models); or a backend a plugin "
                             "registered (negtrain.config.register_backend)")
    # One flag per server setting, with its description as help: the settings are defined once
    # (negtrain/core/server_settings.py), and the recipe's evaluation.server section is made from them too.
    for setting in flagged():
        served.add_argument(setting.option, dest=setting.dest, type=setting.cli_type, metavar=setting.metavar, help=setting.help())
    served.add_argument("--cache", type=Path, help="the response cache (a folder or .sqlite file) to share between cards (default: in --out)")


def _score_in_process(*args, **settings):
    """The training floor's in-process card scoring, imported only when an hf card scores (a
    served card imports no Lightning)."""
    from negtrain.training.run import score_in_process

    return score_in_process(*args, **settings)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.model is not None:
        from negtrain.evaluation.card import make_card

        if args.predictions is not None or args.list:
            raise NegtrainError("--model makes a report card; it does not combine with --predictions or --list")
        if args.protocol and (args.strategy or args.shots or args.benchmarks != "all"):
            raise NegtrainError("--protocol names its own benchmarks, strategies and shots; drop --benchmarks, --strategy and --shots")
        if args.shots == "paper" and not args.strategy:
            raise NegtrainError("--shots paper uses a strategy's fixed demonstrations; add --strategy NAME")
        from negtrain.config import DEFAULT_BACKEND, loads_here

        if args.json or (args.allow_missing and loads_here(args.backend or DEFAULT_BACKEND)):
            given = [f for f, on in (("--json", args.json), ("--allow-missing", args.allow_missing)) if on]
            raise NegtrainError(f"{', '.join(given)}: a report card writes card.md and metrics.jsonl, and scores every "
                                "example it loads; --allow-missing is for --predictions or --backend openai")
        check_bootstrap(args)
        # extra: recipe overrides such as --trainer.devices=2. A classifier or masked LM is scored
        # through the training floor, which the card (evaluation/) never imports: handed in from
        # here, and imported only when such a card calls it.
        out = make_card(card_request(args, extra), in_process=_score_in_process)
        print(f"browse every example: {command_for(out)}")
        return 0
    card_only = [f"--{n}" for n in ("family", "adapter", "out", "strategy", "protocol", "system", "truncate") if getattr(args, n) is not None]
    card_only += [f for f, on in (("--chat", args.chat), ("--fewshot-as-multiturn", args.fewshot_as_multiturn), ("--no-log-samples", not args.log_samples)) if on]
    card_only += (["--strict"] if args.strict else []) + (["--shots"] if args.shots else [])
    card_only += ["--benchmarks"] if args.benchmarks != "all" else []
    card_only += [s.option for s in flagged() if getattr(args, s.dest) is not None] + (["--cache"] if args.cache is not None else [])
    card_only += ["--backend"] if args.backend is not None else []
    if card_only:
        raise NegtrainError(f"{', '.join(card_only)} go with --model (a report card)")
    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    if args.list:
        print(json.dumps(listing(), indent=1) if args.json else format_listing())
        return 0
    absent = [f"--{n}" for n in ("benchmark", "split", "predictions") if getattr(args, n) is None]
    if absent:
        raise NegtrainError(f"evaluate needs {', '.join(absent)} (or --list)")
    from negtrain.config import EvaluationConfig
    from negtrain.evaluation.predictions import score_file
    from negtrain.evaluation.scored_file import format_scored

    # Unset: a recipe's defaults, so a predictions file and a run are scored with the same draws.
    defaults = EvaluationConfig()
    args.bootstrap = defaults.bootstrap if args.bootstrap is None else args.bootstrap
    args.bootstrap_seed = defaults.bootstrap_seed if args.bootstrap_seed is None else args.bootstrap_seed
    check_bootstrap(args)
    splits = [s.strip() for s in args.split.split(",")]
    if len(splits) > 1:
        from negtrain.evaluation.across_splits import format_across, score_splits

        result = score_splits(args.benchmark, splits, args.predictions, allow_missing=args.allow_missing,
                              bootstrap=args.bootstrap, bootstrap_seed=args.bootstrap_seed)
        print(json.dumps(result.as_json()) if args.json else format_across(result))
        return 0
    if len(args.predictions) > 1:
        raise NegtrainError(f"{len(args.predictions)} --predictions files for one split; give one, or a split per file (--split a,b,...)")
    scored = score_file(args.benchmark, args.split, args.predictions[0], allow_missing=args.allow_missing,
                        bootstrap=args.bootstrap, bootstrap_seed=args.bootstrap_seed)
    print(json.dumps(scored.as_json()) if args.json else format_scored(scored))
    return 0


def card_request(args: argparse.Namespace, extra: list[str]):
    """The report card's typed request (negtrain.evaluation.card.CardRequest), made once from the command line."""
    from negtrain.config import DEFAULT_BACKEND
    from negtrain.evaluation.card import CardRequest

    from negtrain.core.errors import NegtrainError

    for name in ("strategy", "protocol", "family", "benchmarks"):
        value = getattr(args, name, None)
        if isinstance(value, str) and not value.strip():
            raise NegtrainError(f"--{name}: empty; give a name (evaluate --list shows them) or leave the flag out")
    server = {s.name: getattr(args, s.dest) for s in flagged() if getattr(args, s.dest) is not None}
    return CardRequest(
        model=args.model, family=args.family, adapter=args.adapter, benchmarks=args.benchmarks, shots=args.shots,
        strategy=args.strategy, protocol=args.protocol, chat=args.chat, system=args.system,
        fewshot_as_multiturn=args.fewshot_as_multiturn, log_samples=args.log_samples, truncate=args.truncate, out=args.out,
        strict=args.strict, backend=args.backend or DEFAULT_BACKEND, server=server, allow_missing=args.allow_missing, cache=args.cache,
        bootstrap=args.bootstrap, bootstrap_seed=args.bootstrap_seed, overrides=tuple(extra),
    )


def shots_arg(value: str) -> int | str:
    """--shots: a number >= 0, or 'paper'."""
    if value == "paper":
        return value
    try:
        k = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a number of shots or 'paper', not {value!r}") from None
    if k < 0:
        raise argparse.ArgumentTypeError(f"--shots must be >= 0, got {k}")
    return k


def listing() -> list[dict]:
    from negtrain.benchmarks.matrix import matrix
    from negtrain.benchmarks.registry import BENCHMARKS

    out = []
    for scoring in matrix():  # each row names its benchmark, so nothing is paired by position
        name = scoring["benchmark"]
        cls = BENCHMARKS[name]
        spaces = cls.prediction_spaces or (tuple(cls.labels),)
        out.append(
            {
                "benchmark": name,
                "splits": list(cls.splits),
                "labels": list(cls.labels),
                "prediction_labels": [list(s) for s in spaces],
                "metrics": [d.name for d in cls.reported_metrics],
                "lower_is_better": [d.name for d in cls.reported_metrics if not d.higher_is_better],
                "counts": [d.name for d in cls.reported_metrics if d.kind == "count"],
                "eval_splits": scoring["eval_splits"],
                "families": scoring["families"],
                "prompts": scoring["prompts"],
                "verbalizer": scoring["verbalizer"],
                "strategies": scoring["strategies"],
                "not_reproducible": scoring["not_reproducible"],
                # The distribution of the plugin that added it; None: it ships with negtrain.
                "plugin": BENCHMARKS.origin(name),
            }
        )
    return out


def format_matrix(rows: list[dict]) -> str:
    """The scoring matrix as a table: benchmarks x families, 'yes' or '-' (reasons below it)."""
    family_columns = list(rows[0]["families"]) if rows else []
    width = max(len(r["benchmark"]) for r in rows)
    lines = ["scoring matrix (yes: the family scores the benchmark; `all` uses the eval splits)", ""]
    lines.append(f"  {'benchmark':<{width}}  " + "  ".join(f"{f:<9}" for f in family_columns) + "  eval splits")
    for r in rows:
        cells = "  ".join(f"{'yes' if r['families'][f]['supported'] else '-':<9}" for f in family_columns)
        lines.append(f"  {r['benchmark']:<{width}}  {cells}  {', '.join(r['eval_splits'])}")
    return "\n".join(lines)


def format_protocols() -> list[str]:
    from negtrain.prompts.protocols import protocols

    lines = ["protocols (--protocol NAME: one command per paper table)"]
    for p in protocols().values():
        lines.append(f"  {p.name}: {p.paper}")
        lines.append("    variants: " + ", ".join(v.name + (" (--chat)" if v.chat else "") for v in p.variants))
    return lines


def format_backends() -> list[str]:
    from negtrain.config.backends import BACKENDS
    from negtrain.core.plugins import plugin_mark

    return ["backends (--backend NAME): " + ", ".join(name + plugin_mark(BACKENDS, name) for name in BACKENDS)]


def format_listing() -> str:
    from negtrain.core.plugins import plugin_lines

    rows = listing()
    plugins = plugin_lines()
    lines = [format_matrix(rows), "", *format_backends(), "", *format_protocols(), "", *plugins, *([""] if plugins else [])]
    for b in rows:
        lines.append(f"{b['benchmark']}" + (f" (plugin {b['plugin']})" if b["plugin"] else ""))
        lines.append(f"  splits:  {', '.join(b['splits'])}")
        lines.append(f"  labels:  {', '.join(b['labels']) or '(open vocabulary: predictions are token strings)'}")
        if len(b["prediction_labels"]) > 1:
            lines.append("  also scores: " + "; ".join(", ".join(s) for s in b["prediction_labels"][1:]) + " predictions")
        lines.append(f"  metrics: {', '.join(b['metrics']) or '(see the benchmark module)'}")
        if b["lower_is_better"]:
            lines.append(f"  lower is better: {', '.join(b['lower_is_better'])}")
        for family, cell in b["families"].items():
            lines.append(f"  {family + ':':<10} {cell['how'] if cell['supported'] else 'unsupported: ' + cell['how']}")
        for family, prompt in b["prompts"].items():
            lines.append(f"  {family} prompt: {prompt!r}")
        if b["verbalizer"]:
            lines.append("  verbalizer: " + ", ".join(f"{k} -> {v!r}" for k, v in b["verbalizer"].items()))
        if b["strategies"]:
            lines.append("  strategies (--strategy NAME; --shots paper: the paper's demonstrations):")
            lines += [f"    {name}: {how}" for name, how in b["strategies"].items()]
        if b.get("not_reproducible"):
            lines.append("  not reproducible (the paper's prompt is not given as text; asking for it is an error):")
            lines += [f"    {name}: {why}" for name, why in b["not_reproducible"].items()]
    return "\n".join(lines)
