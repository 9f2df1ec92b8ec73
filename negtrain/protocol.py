"""A protocol run: a paper's table as one command (``evaluate --model M --family F --protocol NAME``).

The protocol's variants (``negtrain/prompts/protocols.yaml``) become the eval entries of one
report-card run, so the model is loaded once; each variant's metrics.jsonl line carries
``"variant"`` and its predictions go to ``predictions/<benchmark>-<split>-<variant>.jsonl``.
``protocol.md`` lays the results out as the paper's table: one row per variant (and per named
baseline), one column per metric of the protocol's ``table``, each with its 95% interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from negtrain.benchmarks.registry import get_benchmark
from negtrain.errors import ConfigError, unknown_name
from negtrain.io.atomic import write_text
from negtrain.metrics.uncertainty import estimate
from negtrain.prompts.protocols import Protocol


def eval_entries(protocol: Protocol, chat: bool) -> list[dict[str, Any]]:
    """The recipe's ``data.eval`` for a protocol run (the variants that apply with/without --chat)."""
    selected = protocol.selected(chat)
    if not selected:
        raise ConfigError(f"--protocol {protocol.name}: no variant applies {'with' if chat else 'without'} --chat")
    return [
        {"benchmark": v.benchmark, "split": v.split, "strategy": v.strategy, "shots": v.shots, "variant": v.name}
        for v in selected
    ]


def ignore_negation(split: str, resamples: int, seed: int) -> tuple[dict[str, float], dict]:
    """ScoNe's Ignore-Negation baseline (She et al. 2023, Table 4, last row): every example is
    predicted as if its negations were absent, i.e. with the gold label of its contrast set's
    no_negation member. Scored on the whole split with ScoNe's metric and intervals."""
    bench = get_benchmark("scone")
    examples = bench.load(split)
    reference = {e.group: e.label for e in examples if e.subset == "no_negation"}
    metric = bench.metric(examples)
    predicted = [bench.labels.index(reference[e.group]) for e in examples]
    metric.update(torch.arange(len(examples)), torch.tensor(predicted))
    values = {k: float(v) for k, v in metric.compute().items()}
    spread = estimate(metric, metric.last_outcomes, resamples, seed, bench.is_count).as_json()
    return values, spread


BASELINES: dict[str, tuple[str, Callable]] = {"ignore_negation": ("Ignore-Negation", ignore_negation)}


def _cell(value: float | None, spread: dict | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    ci = (spread or {}).get("ci95")
    return f"{value:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and ci[0] is not None else "")


def protocol_markdown(protocol: Protocol, records: list[dict], model: str, resamples: int, seed: int) -> str:
    by_variant = {r.get("variant"): r for r in records}
    headers = [h for _, h in protocol.columns]
    lines = [f"# {protocol.name}: `{model}`", "", f"{protocol.paper}", ""]
    lines.append("| variant | " + " | ".join(headers) + " | n | n_unparsed | tokens generated | examples/s |")
    lines.append("|---|" + "---|" * (len(headers) + 4))
    for v in protocol.variants:
        r = by_variant.get(v.name)
        if r is None:
            continue
        m, spread = r["metrics"], r.get("uncertainty") or {}
        cells = [_cell(m.get(k), spread.get(k)) for k, _ in protocol.columns]
        n, seconds = m.get("n"), r.get("eval_seconds")
        rate = f"{n / seconds:.1f}" if n and seconds else "-"
        unparsed = m.get("n_unparsed")
        lines.append(
            f"| {v.name} | " + " | ".join(cells)
            + f" | {int(n) if n is not None else '-'} | {int(unparsed) if unparsed is not None else '-'} | {r.get('tokens_generated', '-')} | {rate} |"
        )
    if protocol.baseline:
        if protocol.baseline not in BASELINES:
            raise unknown_name("protocol baseline", protocol.baseline, BASELINES)
        title, compute = BASELINES[protocol.baseline]
        split = protocol.variants[0].split
        values, spread = compute(split, resamples, seed)
        cells = [_cell(values.get(k), spread.get(k)) for k, _ in protocol.columns]
        lines.append(f"| {title} | " + " | ".join(cells) + f" | {int(values.get('n', 0))} | - | - | - |")
        lines += ["", f"{title}: a baseline computed from the data (every example of {split}), not from the model."]
    lines += [
        "",
        "Brackets: the 95% percentile-bootstrap interval (contrast sets resampled whole). `-`: undefined on what was scored.",
        "n_unparsed: responses no answer rule could read, scored as wrong.",
        "",
    ]
    return "\n".join(lines)


def write_protocol(out: Path, protocol: Protocol, records: list[dict], model: str, resamples: int, seed: int) -> None:
    write_text(out / "protocol.md", protocol_markdown(protocol, records, model, resamples, seed))



