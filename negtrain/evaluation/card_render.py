"""The report card's files: ``card.md`` (benchmarks x accuracy and every consistency metric, with
what was skipped and why) and ``card.png`` (accuracy against consistency), made from the card's
records as they were just computed."""

from __future__ import annotations

import math
from pathlib import Path

from negtrain.config import FAMILY_SECTIONS, IN_PROCESS
from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import write_text
from negtrain.io.records import EvalRecord, RunRecord
from negtrain.metrics.declared import headline, with_role
from negtrain.metrics.uncertainty import format_interval


def chat_template_line(recipe) -> str | None:
    """Whether the prompts went through a chat template, as one line of the card's tables (None
    for a family that reads no prompt). Without ``--chat`` (``model.chat``) or a run's
    ``model.chat_template: true``, a prompt reaches the model as written."""
    model = recipe.model
    if not FAMILY_SECTIONS[model.family].reads_prompts:
        return None
    if recipe.evaluation.backend == "transformers":  # the served path, rendered here as the hf backend renders
        return ("Chat template: the tokenizer's, applied to every prompt (--chat)." if model.chat
                else "Chat template: none; prompts as written (no --chat).")
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


def card_markdown(records: list[RunRecord], model: str, family: str, skipped, *, record: dict | None = None,
                  template: str | None = None, fresh_head: str | None = None) -> str:
    """``record``: the card's provenance (:mod:`negtrain.models.provenance`), shown at the end;
    ``template``: whether the prompts went through a chat template (:func:`chat_template_line`)."""
    from negtrain.models import provenance

    evals = [r for r in records if isinstance(r, EvalRecord)]
    columns: list[str] = []
    for r in evals:
        columns += [k for k in with_role(r["metrics"], "consistency") if k not in columns]
    lines = [f"# Negation report card: `{model}` ({family})", ""] + ([template, ""] if template else [])
    gguf = ((record or {}).get("model") or {}).get("gguf")
    if gguf:  # the weights a card scored came quantized: which quantization, dequantized to what
        lines += [f"Weights: a {gguf.get('quantization')} GGUF file, dequantized to {gguf.get('dtype')} by transformers' GGUF "
                  "loader (provenance.json: the file's SHA-256).", ""]
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
            name = r["benchmark"] + (f" ({r['variant']})" if r.get("variant") else "")
            lines.append(f"| {name} | {r['split']} | {q['sent'] + q['cached']} | {q['tokens_in']} | {q['tokens_out']} |")
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


def write_card(out: Path, records: list[RunRecord], model: str, family: str, skipped, *, template: str | None = None,
               fresh_head: str | None = None) -> None:
    """card.md and card.png from the card's records (what its metrics.jsonl holds, handed on in memory)."""
    from negtrain.models import provenance

    records = [r for r in records if r.stage == "validate"]
    if not records:
        raise NegtrainError(f"{out / 'metrics.jsonl'}: no evaluation was recorded")
    write_text(out / "card.md", card_markdown(records, model, family, skipped, record=provenance.read(out), template=template,
                                                   fresh_head=fresh_head))
    plot_card(records, out / "card.png", f"{model} ({family})")
