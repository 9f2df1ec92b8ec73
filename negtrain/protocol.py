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
from negtrain.io.records import EvalRecord
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


def protocol_markdown(protocol: Protocol, records: list[EvalRecord], model: str, resamples: int, seed: int,
                      out: Path | None = None) -> str:
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
    if protocol.across_splits:
        lines += split_summary_rows(protocol, by_variant, out, resamples, seed)
    lines += [
        "",
        "Brackets: the 95% percentile-bootstrap interval (contrast sets resampled whole). `-`: undefined on what was scored.",
        "n_unparsed: responses no answer rule could read, scored as wrong.",
    ]
    if protocol.across_splits:
        lines.append("mean ± std: over the splits, the sample standard deviation (n - 1). pooled: every split's "
                     "predictions scored as one set.")
    if protocol.note:
        lines += ["", protocol.note]
    lines += run_notes(protocol, by_variant)
    lines.append("")
    return "\n".join(lines)


def run_notes(protocol: Protocol, by_variant: dict) -> list[str]:
    """What qualifies a variant's numbers beyond the table: prompts cut to fit the model's
    context (``n_truncated``, under --truncate left) and the record's note (an explicit lower
    precision, a partial view of the benchmark)."""
    notes = []
    for v in protocol.variants:
        r = by_variant.get(v.name)
        if r is None:
            continue
        cut = r["metrics"].get("n_truncated")
        if cut is not None:
            notes.append(f"- {v.name}: n_truncated {int(cut)} (prompts cut from the start to fit the model's context, --truncate left)")
        if r.get("note"):
            notes.append(f"- {v.name}: {r['note']}")
    return ["", "## Notes", "", *notes] if notes else []


def split_summary_rows(protocol: Protocol, by_variant: dict, out: Path | None, resamples: int, seed: int) -> list[str]:
    """Per format (variants named ``<format>/<split number>``), a row of the mean ± std over its
    splits and, with the run directory ``out``, a row of the pooled score (the splits'
    predictions files scored as one set, :mod:`negtrain.across_splits`)."""
    from negtrain.across_splits import score_splits, summarize

    formats: dict[str, list] = {}
    for v in protocol.variants:
        if v.name in by_variant:
            formats.setdefault(v.name.rsplit("/", 1)[0], []).append(v)
    rows = []
    pad = " | -" * 4
    for fmt, variants in formats.items():
        records = [by_variant[v.name] for v in variants]
        bench = get_benchmark(variants[0].benchmark)
        summary = summarize([r["metrics"] for r in records], bench.is_count)
        cells = [_mean_std(summary.get(k)) for k, _ in protocol.columns]
        rows.append(f"| {fmt}: mean ± std over {len(variants)} splits | " + " | ".join(cells) + pad + " |")
        if out is None:
            continue
        paths = [out / "predictions" / f"{v.file_stem}.jsonl" for v in variants]
        if not all(p.is_file() for p in paths):
            continue
        pooled = score_splits(bench.name, [v.split for v in variants], paths, bootstrap=resamples, bootstrap_seed=seed).pooled
        if pooled is None:
            continue
        spread = pooled.uncertainty.as_json() if pooled.uncertainty is not None else {}
        cells = [_cell(pooled.metrics.get(k), spread.get(k)) for k, _ in protocol.columns]
        n, unparsed = pooled.metrics.get("n"), pooled.metrics.get("n_unparsed")
        rows.append(f"| {fmt}: pooled | " + " | ".join(cells)
                    + f" | {int(n) if n is not None else '-'} | {int(unparsed) if unparsed is not None else '-'} | - | - |")
    return rows


def _mean_std(stats: dict | None) -> str:
    if not stats or stats.get("mean") is None:
        return "-"
    std = stats.get("std")
    return f"{stats['mean']:.2f}" + (f" ± {std:.2f}" if std is not None else "")


def write_protocol(out: Path, protocol: Protocol, records: list[EvalRecord], model: str, resamples: int, seed: int) -> None:
    write_text(out / "protocol.md", protocol_markdown(protocol, records, model, resamples, seed, out))



