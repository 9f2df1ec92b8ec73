"""The report card's files: ``card.md`` (benchmarks x their headline score, its baseline and every
consistency metric, with n of N for a cut split and what was skipped and why) and ``card.png``
(headline score against consistency, with the baselines), made from the card's records as they
were just computed."""

from __future__ import annotations

import json
from collections.abc import Sequence
import math
from collections.abc import Mapping
from pathlib import Path

from negtrain.benchmarks.registry import BENCHMARKS
from negtrain.config import FAMILY_SECTIONS, backend_row
from negtrain.core.errors import NegtrainError
from negtrain.core.server_settings import changing_fields, let_through
from negtrain.evaluation.tinad_figure2 import draw_figure2, figure2_section, tinad_rows
from negtrain.io.atomic import write_text
from negtrain.io.records import EvalRecord, RunRecord
from negtrain.metrics.baselines import at_or_below, highest
from negtrain.metrics.declared import headline, with_role
from negtrain.metrics.uncertainty import format_interval


def chat_template_line(recipe) -> str | None:
    """Whether the prompts went through a chat template, as one line of the card's tables (None
    for a family that reads no prompt). Without ``--chat`` (``model.chat``) or a run's
    ``model.chat_template: true``, a prompt reaches the model as written."""
    model = recipe.model
    if not FAMILY_SECTIONS[model.family].reads_prompts:
        return None
    applied = backend_row(recipe.evaluation.backend).chat_template
    if applied is None:
        return f"Chat template: whatever the {recipe.evaluation.backend} backend applies; prompts sent as written."
    if applied == "server":
        line = ("Chat template: the server's, through /v1/chat/completions (--chat)." if model.chat
                else "Chat template: none; prompts as written, through /v1/completions (no --chat).")
        return line + extra_body_words(recipe.evaluation.server)
    if model.chat:
        return "Chat template: the tokenizer's, applied to every prompt (--chat)."
    if model.wraps_in_chat_template():
        return "Chat template: the tokenizer's where it has one (the run's model.chat_template: true)."
    return "Chat template: none; prompts as written (no --chat)."


#: A data baseline's column header in card.md (the papers' name for it).
BASELINE_HEADERS = {"majority_baseline": "MB (majority baseline)"}


def extra_body_words(server) -> str:
    """What ``--extra-body`` added to every generation request, as the end of the card's chat
    template line (card.md and protocol.md), with the fields sent although they change what is
    scored (``--extra-body-allow``); empty when nothing was added."""
    if server is None or not server.extra_body:
        return ""
    sent = json.dumps(server.extra_body, sort_keys=True, ensure_ascii=False)
    allowed = [path for path in changing_fields(server.extra_body) if let_through(path, server.extra_body_allow)]
    return (f" Every generation request also sent (--extra-body): {sent}"
            + (f"; of these, {', '.join(allowed)} change what is scored (--extra-body-allow)." if allowed else "."))


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


#: What the card's baseline column holds (card.md's legend; the viewer says the same).
BASELINE_LEGEND = ("the higher of majority (the score of the best constant prediction on the same examples) and "
                   "chance (uniform guessing: 1/k for accuracy over k labels).")


def baseline_cell(record) -> str:
    """``0.7911 (majority)``: a record's highest baseline, named; ``-`` without one."""
    top = highest(record.get("baseline"))
    return "-" if top is None else f"{top[1]:.4f} ({top[0]})"


def part_n(record) -> float | None:
    """The examples a record's numbers rest on: its ``n``, else (a benchmark without one, such as
    negated LAMA's probes) the rows its subset offered the model."""
    n = record["metrics"].get("n")
    return n if n is not None else (record.get("subset") or {}).get("scored")


def n_of(record) -> str:
    """The n a record's numbers rest on: ``32 of 1,200`` for part of its split."""
    n = part_n(record)
    if n is None:
        return "-"
    subset = record.get("subset")
    return f"{int(n):,} of {int(subset['of']):,}" if subset else str(int(n))


def subset_head(records) -> str:
    """The head line of a card (and a protocol) whose numbers rest on part of their splits."""
    settings = sorted({r["subset"]["cut_by"] for r in records})
    parts = [f"{r['benchmark']}/{r['split']}" + (f" ({r['variant']})" if r.get("variant") else "")
             + f" {int(part_n(r) or 0):,} of {int(r['subset']['of']):,}" for r in records]
    shown = ", ".join(parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")
    return (f"**Part of the data.** Cut by {', '.join(settings)}: these numbers rest on {shown} examples, "
            "not on whole splits; they are not the benchmarks' scores. The rows kept are whole contrast groups "
            "(every member, so every condition a group spans), drawn with the recipe's seed: the same rows on "
            "every backend and rerun.")


#: The share of a split's scored answers that, empty or unreadable, puts a warning above the
#: card's table: past it the score says more about the answers' form than about negation.
SILENT_ANSWERS_WARNING_SHARE = 0.2


def silent_answers(metrics: dict) -> tuple[int, int, int] | None:
    """(empty, unparsed, scored) of a split answered by generation with an answer rule; None for
    one answered otherwise (or an older record without the counts)."""
    if metrics.get("n_empty") is None or metrics.get("n") is None:
        return None
    return int(metrics["n_empty"]), int(metrics.get("n_unparsed") or 0), int(metrics["n"])


def silent_answers_cell(metrics: dict) -> str:
    """``empty 64, unparsed 0 of 64``: beside the score on the card and in the plot's key."""
    counts = silent_answers(metrics)
    if counts is None:
        return ""
    empty, unparsed, n = counts
    return f"empty {empty:,}, unparsed {unparsed:,} of {n:,}"


def silent_answers_head(records) -> str | None:
    """The warning above a card's table when a split's empty or unreadable answers pass
    :data:`SILENT_ANSWERS_WARNING_SHARE` of what it scored."""
    over = []
    for r in records:
        counts = silent_answers(r["metrics"])
        if counts and counts[2] and (counts[0] + counts[1]) / counts[2] > SILENT_ANSWERS_WARNING_SHARE:
            over.append(f"{r['benchmark']}/{r['split']}" + (f" ({r['variant']})" if r.get("variant") else "")
                        + f" ({silent_answers_cell(r['metrics'])})")
    if not over:
        return None
    return (f"**Answers not read.** More than {SILENT_ANSWERS_WARNING_SHARE:.0%} of the answers were empty or unreadable on "
            + ", ".join(over) + ". An empty answer is scored as the answer rule reads \"\" (ScoNe's \"contains yes\": "
            "\"no\"), an unreadable one as wrong: these scores say how the model answered, not whether it understood "
            "negation (try --chat, another strategy, or a larger max_new_tokens).")


def how_asked_cells(asked: dict) -> str:
    """A card's "How the model was asked" cells from a record's ``asked``
    (:func:`negtrain.evaluation.served.how_asked`): mode, strategy, shots, and what decides."""
    shots = str(asked.get("shots", 0)) + (f" (down to {asked['min_shots']} where they do not fit)" if asked.get("min_shots") is not None else "")
    if asked.get("verbalizers"):
        decides = "the higher log-likelihood of " + ", ".join(f"{label}: `{text!r}`" for label, text in asked["verbalizers"].items())
    elif asked.get("answer_rule"):
        decides = (f"answer rule `{asked['answer_rule']}` on greedy text of at most {asked.get('max_new_tokens')} tokens "
                   f"({asked.get('at_token_limit', 0):,} answers used all of them)")
    elif asked.get("mode") == "choices":
        decides = "the choice with the higher log-likelihood after the question"
    elif asked.get("mode") == "cloze":
        decides = "the next-token distribution at the blank"
    else:
        decides = "-"
    return f"{asked.get('mode', '-')} | {asked.get('strategy') or 'the benchmark default'} | {shots} | {decides}"


def card_markdown(records: list[RunRecord], model: str, family: str, skipped, *, record: dict | None = None,
                  template: str | None = None, fresh_head: str | None = None, selected_on_test: str | None = None,
                  run_notes: Sequence[str] = ()) -> str:
    """``record``: the card's provenance (:mod:`negtrain.models.provenance`), shown at the end;
    ``template``: whether the prompts went through a chat template (:func:`chat_template_line`);
    ``selected_on_test`` and ``run_notes``: what the card says of the run its weights came from
    (negtrain.evaluation.card_run_data: bold paragraphs above the table, and notes)."""
    from negtrain.models import provenance

    evals = [r for r in records if isinstance(r, EvalRecord)]
    columns: list[str] = []
    for r in evals:  # a data baseline (NegNLI's MB) first, beside accuracy; then the consistencies
        columns += [k for k in with_role(r["metrics"], "baseline") if "/" not in k and k not in columns]
    for r in evals:
        columns += [k for k in with_role(r["metrics"], "consistency") if k not in columns]
    lines = [f"# Negation report card: `{model}` ({family})", ""] + ([template, ""] if template else [])
    lines += [selected_on_test, ""] if selected_on_test else []
    gguf = ((record or {}).get("model") or {}).get("gguf")
    if gguf:  # the weights a card scored came quantized: which quantization, dequantized to what
        lines += [f"Weights: a {gguf.get('quantization')} GGUF file, dequantized to {gguf.get('dtype')} by transformers' GGUF "
                  "loader (provenance.json: the file's SHA-256).", ""]
    if fresh_head:  # before the numbers it qualifies
        said = fresh_head.removeprefix("note: ")
        lines += [f"**Chance level.** {said[0].upper() + said[1:]}.", ""]
    cut = [r for r in evals if r.get("subset")]
    if cut:  # before the numbers it qualifies
        lines += [subset_head(cut), ""]
    if (silent := silent_answers_head(evals)) is not None:  # before the numbers it qualifies
        lines += [silent, ""]
    lines.append("| benchmark | split | score | baseline | " + " | ".join(BASELINE_HEADERS.get(c, c) for c in columns) + (" | " if columns else "") + "n | seconds | examples/s | tokens generated |")
    lines.append("|---|---|---|---|" + "---|" * len(columns) + "---|---|---|---|")
    notes = list(run_notes)
    units: list[str] = []
    for r in evals:
        m = r["metrics"]
        spread = r.get("uncertainty") or {}
        acc = headline(m)
        acc_cell = "-" if acc is None else _with_ci(m[acc], spread.get(acc)) + ("" if acc == "accuracy" else f" ({acc})")
        acc_cell += " **≤ baseline**" if at_or_below(r) else ""
        if silent_answers(m) is not None:  # a generated answer: how many were empty or unreadable
            acc_cell += f" ({silent_answers_cell(m)})"
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
            line = f"- {r['benchmark']}/{r['split']}: {r['bootstrap']['units']} × {r['bootstrap']['unit']}"
            if r.get("subset") and part_n(r) is not None:
                line += f" (those its {int(part_n(r) or 0):,} scored examples belong to)"
            if line not in units:  # a protocol's variants of one split share it: said once
                units.append(line)
        name = r["benchmark"] + (f" ({r['variant']})" if r.get("variant") else "")
        lines.append(
            f"| {name} | {r['split']} | {acc_cell} | {baseline_cell(r)} | " + " | ".join(cells) + (" | " if columns else "")
            + f"{n_of(r)} | {seconds if seconds is not None else '-'} | {rate} | {r.get('tokens_generated', '-')} |"
        )
        if r.get("note"):
            notes.append(f"- {r['benchmark']}/{r['split']}: {r['note']}")
        if (bench := BENCHMARKS.get(r["benchmark"])) is not None and r["split"] in bench.split_descriptions:
            notes.append(f"- {r['benchmark']}/{r['split']}: {bench.split_descriptions[r['split']]}")
        if r.get("shots_used"):
            rows = ", ".join(f"{k} shots: {v}" for k, v in (r["shots_used"].get("rows") or {}).items())
            notes.append(f"- {name}/{r['split']}: rows by the number of shots they were shown ({rows}); min_shots "
                         f"{r['shots_used'].get('fewest')} where {r['shots_used'].get('asked')} do not fit the model's context")
        if m.get("n_truncated") is not None:
            notes.append(f"- {name}/{r['split']}: n_truncated {int(m['n_truncated'])} of {int(n) if n is not None else '-'} "
                         "(prompts cut from the start to fit the model's context, --truncate left)")
    lines.append("")
    lines.append("score: each benchmark's headline metric, as its paper reports it, named when it is not accuracy "
                 "(NaN-NLI: f1 for 3-way predictions, binary_f1 for 2-way ones). "
                 f"baseline: {BASELINE_LEGEND} **≤ baseline**: the model does no better than it.")
    lines.append("")
    lines.append("`-`: undefined on what was scored (e.g. no complete contrast group); empty: the benchmark has no such metric.")
    if any(c in BASELINE_HEADERS for c in columns):
        lines.append("MB: the majority baseline, the share of the most frequent gold label among the scored examples "
                     "(from the data, not the model), beside the model's accuracy on them.")
    if units:
        lines += [
            "",
            "Brackets: the 95% percentile-bootstrap interval, resampling each benchmark's independent unit "
            "(a contrast group is resampled whole, so consistency intervals are honest):",
            "",
            *units,
        ]
    asked = [r for r in evals if r.get("asked")]
    if asked:
        lines += ["", "## How the model was asked", "",
                  "Per benchmark: how its answers were obtained (what the numbers above depend on besides the model).", "",
                  "| benchmark | split | answer mode | strategy | shots | what decides the answer |", "|---|---|---|---|---|---|"]
        for r in asked:
            name = r["benchmark"] + (f" ({r['variant']})" if r.get("variant") else "")
            lines.append(f"| {name} | {r['split']} | {how_asked_cells(r['asked'])} |")
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
    lines += figure2_section(figure2_rows(evals), "fractions")
    if notes:
        lines += ["", "## Notes", "", *notes]
    lines += ["", "Predictions: `predictions/`; every number above is what `negtrain evaluate --predictions` gives on those files.", ""]
    lines += provenance.markdown(record, file_table=False)  # the data files' hashes: provenance.json
    return "\n".join(lines)


def figure2_rows(records) -> list[tuple[str, Mapping[str, float | None]]]:
    """The card's TINAD records as Figure 2's rows (one per split and variant)."""
    return tinad_rows((f"{r['benchmark']}/{r['split']}" + (f" ({r['variant']})" if r.get("variant") else ""), r["benchmark"], r["metrics"])
                      for r in records if isinstance(r, EvalRecord))


def plot_card(records: list[RunRecord], path: Path, title: str) -> list[str]:
    """Each benchmark's headline score (x: accuracy, or the metric its paper reports, e.g.
    NaN-NLI's F1 or binary F1) against its headline consistency (y), one numbered point per
    benchmark; a benchmark without a consistency value sits in the strip below the plot. A grey
    ``|`` on the same line marks its baseline (majority or chance), joined to the point. Under the
    plot a key from each number to the benchmark, its values and its baseline. Points closer than
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
        if acc is None or m.get(acc) is None:
            continue
        y = float(m[cons[0]]) if cons and m.get(cons[0]) is not None else NO_CONSISTENCY
        name = f"{r['benchmark']}/{r['split']}" + (f"/{r['variant']}" if r.get("variant") else "")
        points.append((name, acc, cons[0] if cons else None, float(m[acc]), y, highest(r.get("baseline")),
                       at_or_below(r), silent_answers_cell(m)))
    spots: list[list[int]] = []  # each: the points within SAME_SPOT of its first one
    for i, (_, _, _, x, y, *_) in enumerate(points):
        near = next((g for g in spots if abs(points[g[0]][3] - x) < SAME_SPOT and abs(points[g[0]][4] - y) < SAME_SPOT), None)
        if near is None:
            spots.append([i])
        else:
            near.append(i)
    key_rows = max(len(points), 1)
    fig, (ax, key) = plt.subplots(2, 1, figsize=(7.5, 5 + 0.17 * key_rows),
                                  gridspec_kw={"height_ratios": [5, 0.17 * key_rows + 0.2]})
    for _, _, _, x, y, baseline, *_ in points:
        if baseline is not None:
            ax.plot([baseline[1], x], [y, y], "-", color="grey", linewidth=0.6, zorder=1)
            ax.scatter([baseline[1]], [y], marker="|", s=80, color="grey", zorder=2)
    for members in spots:
        xs, ys = [points[i][3] for i in members], [points[i][4] for i in members]
        ax.scatter(xs, ys, s=30, zorder=3, color=["#c62828" if points[i][6] else "#1565c0" for i in members])
        numbers = [str(i + 1) for i in members]
        label = "\n".join(", ".join(numbers[k:k + 6]) for k in range(0, len(numbers), 6))
        ax.annotate(label, (sum(xs) / len(xs), sum(ys) / len(ys)), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.plot([0, 1], [0, 1], ":", color="grey", linewidth=0.8)  # consistency can never exceed accuracy much
    if any(p[4] == NO_CONSISTENCY for p in points):
        ax.axhspan(-0.2, -0.04, color="0.93", zorder=0)
        ax.text(0.01, NO_CONSISTENCY - 0.06, "no consistency metric or value", fontsize=6, color="0.4")
    ax.set_xlim(-0.02, 1.02)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylim(-0.2 if any(p[4] == NO_CONSISTENCY for p in points) else -0.02, 1.02)
    names = list(dict.fromkeys(p[1] for p in points))
    ax.set_xlabel("score: " + (", ".join(names) if names else "none") + " (grey |: baseline; red: at or below it)")
    ax.set_ylabel("consistency (all of a contrast group right)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    key.axis("off")
    lines = []
    for i, (name, acc, consistency, x, y, baseline, below, silent) in enumerate(points):
        line = f"{i + 1:>2}  {name}: {acc} {x:.3f}, " + (f"{consistency} {y:.3f}" if y != NO_CONSISTENCY else "no consistency")
        if baseline is not None:
            line += f", {baseline[0]} {baseline[1]:.3f}" + (" (at or below)" if below else "")
        if silent:
            line += f"; answers {silent}"
        lines.append(line)
    key.text(0, 1, "\n".join(lines) or "(no benchmark has a headline score)", family="monospace",
             fontsize=7, va="top", ha="left", transform=key.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"negtrain:points": ",".join(p[0] for p in points)})
    plt.close(fig)
    return [p[0] for p in points]


#: Where card.png draws a benchmark without a consistency value: a strip below the plot.
NO_CONSISTENCY = -0.12
#: Points of card.png closer than this (in accuracy and in consistency) share one label.
SAME_SPOT = 0.04


def write_card(out: Path, records: list[RunRecord], model: str, family: str, skipped, *, template: str | None = None,
               fresh_head: str | None = None, selected_on_test: str | None = None, run_notes: Sequence[str] = ()) -> None:
    """card.md and card.png from the card's records (what its metrics.jsonl holds, handed on in memory)."""
    from negtrain.models import provenance

    records = [r for r in records if r.stage == "validate"]
    if not records:
        raise NegtrainError(f"{out / 'metrics.jsonl'}: no evaluation was recorded")
    write_text(out / "card.md", card_markdown(records, model, family, skipped, record=provenance.read(out), template=template,
                                                   fresh_head=fresh_head, selected_on_test=selected_on_test, run_notes=run_notes))
    plot_card(records, out / "card.png", f"{model} ({family})")
    draw_figure2(figure2_rows(records), out, f"TINAD Figure 2: {model} ({family})")
