"""Scoring a predictions file made by any system (an API model, another codebase) on a benchmark.

The file is JSONL, one ``{"id": ..., "prediction": ...}`` per line, where the prediction is a label
string in any common spelling (``Entailment``, ``not-entailment``, ``non_entailment``, ...). Every
example of the split must have exactly one prediction: missing, duplicate and unknown ids are
errors that name the ids. With ``allow_missing`` a subset may be scored, and the result says so.

Scoring uses the benchmark's own metric (the same class and metric names as training). The label
space of the predictions is the finest of the benchmark's prediction spaces that expresses every
prediction: 3-way predictions on a 2-way benchmark are coarsened (neutral and contradiction mean
not_entailment), and 2-way predictions on NaN-NLI are scored on its binary view.

The file is read a line at a time (:func:`read_lines`) and each line is cut to the fields scoring
reads (:data:`KEPT_FIELDS`) as it is parsed, so memory follows the number of predictions, not the
file's size (README, "Scoring any system's predictions", has the measurements).
"""

from __future__ import annotations

import itertools
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from negtrain.core import labels as nli
from negtrain.benchmarks.base import AnswerKind, Benchmark
from negtrain.benchmarks.rows import Row, jsonl_rows
from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import DataError
from negtrain.metrics.base import UNPARSED
from negtrain.evaluation.scored_file import Scored
from negtrain.metrics.uncertainty import uncertainty_of

#: At most this many ids are named in an error message.
SHOW = 10
#: Bounds on a predictions file, so that a device or an endless pipe given by mistake
#: (``--predictions /dev/zero``) is an error, not a read that never ends. A prediction line is
#: an id and a label or a short answer; the largest split (MNLI train, 393k examples) is ~40 MB.
MAX_LINE_BYTES = 1024 * 1024
MAX_FILE_BYTES = 4 * 1024**3
#: Lines beyond a split's examples still parsed (seconds), so repeated ids are named with their lines.
MAX_EXTRA_LINES = 100_000


class PredictionError(DataError):
    """A predictions file is malformed or does not match the benchmark split."""


def _short(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to ``limit`` characters: an id in a message, not a page of it."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 5] + "...' (" + f"{len(text)} characters)"


def _name(ids: Sequence[str]) -> str:
    shown = ", ".join(_short(i) for i in ids[:SHOW])
    return shown + (f", ... ({len(ids) - SHOW} more)" if len(ids) > SHOW else "")


class PredictionRows(list):
    """The rows of a predictions file; ``generated``: its lines come from a split answered by
    generation with an answer rule (they carry ``"unparsed"``), so ``n_unparsed`` is reported."""

    generated = False


class PredictionLine(tuple):
    """(line, id, raw prediction, canonical label), with the line's whole object as ``fields``
    (a model's scores a benchmark re-scores from, e.g. NeQA's ``loglikelihoods``)."""

    fields: dict


def _line(lineno: int, id_: str, pred, label: str | None, fields: dict) -> PredictionLine:
    row = PredictionLine((lineno, id_, pred, label))
    row.fields = fields
    return row


#: The fields of a prediction line that scoring reads besides id and prediction; the rest of a
#: line (a model's raw response, a prompt) is dropped as the line is read, so memory follows the
#: number of predictions, not the file's size.
KEPT_FIELDS = ("id", "prediction", "unparsed", "empty", "loglikelihoods", "choice_chars")


def _kept(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: obj[k] for k in KEPT_FIELDS if k in obj}


def read_predictions(path: Path, bench: Benchmark) -> PredictionRows:
    """(line, id, raw prediction, canonical label) per line; rejects malformed lines.

    For a generative benchmark the canonical label is the answer text itself. A ``null``
    prediction with ``"unparsed": true`` is a response no answer rule could read: label None,
    scored as wrong; a ``null`` prediction without it is an error."""
    rows = PredictionRows()
    for row in jsonl_rows(path, read_lines(path), PredictionError):
        obj, lineno = _kept(row.fields), row.line
        _check_line(obj, "prediction", f"{path}:{lineno}")
        pred = obj["prediction"]
        if "unparsed" in obj:  # a line of a split answered by a strategy's answer rule
            rows.generated = True
        if pred is None and obj.get("unparsed") is True and bench.answer_type is not AnswerKind.CHOICE:
            rows.append(_line(lineno, obj["id"], pred, None, obj))
            continue
        label = bench.normalize_prediction(pred)
        if label is None:
            raise PredictionError(f"{path}:{lineno}: prediction {pred!r} is not {bench.prediction_help}")
        rows.append(_line(lineno, obj["id"], pred, label, obj))
    if not rows:
        raise PredictionError(f"{path}: no predictions")
    return rows


def _check_line(obj: Mapping[str, Any], value_key: str, where: str, hint: str = "") -> None:
    """A line of a predictions or judgements file has a string ``id`` and its ``value_key``."""
    for key in ("id", value_key):
        if key not in obj:
            raise PredictionError(f"{where}: no '{key}' field{hint}")
    if not isinstance(obj["id"], str):
        raise PredictionError(f"{where}: 'id' must be a string, got {obj['id']!r}")


def read_judgements(path: Path, bench: Benchmark) -> list[tuple[int, str, tuple[bool, ...]]] | None:
    """People's judgements of generated text (a benchmark with ``human_judgements``): (line, id,
    judgements) per line, where each line holds ``"coherent"``: true/false (one annotator) or a
    list with one true/false per annotator (two for the paper's agreed-only rule); every line
    the same number. None when the file holds model predictions instead (no ``"coherent"``)."""
    rows = [Row(row.path, row.line, row.index, {k: row.fields[k] for k in ("id", "coherent") if k in row.fields})
            for row in jsonl_rows(path, read_lines(path), PredictionError)]
    if not any("coherent" in row.fields for row in rows):
        return None
    out, annotators = [], None
    for row in rows:
        obj, lineno = row.fields, row.line
        _check_line(obj, "coherent", f"{path}:{lineno}", ' (a judgements file gives every id its "coherent")')
        value = obj["coherent"]
        votes = (value,) if isinstance(value, bool) else tuple(value) if isinstance(value, list) else None
        if not votes or not all(isinstance(v, bool) for v in votes) or len(votes) > 2:
            raise PredictionError(
                f"{path}:{lineno}: field 'coherent': expected true/false, or a list of one or two of them "
                f"(one per annotator), got {value!r}"
            )
        if annotators is not None and len(votes) != annotators:
            raise PredictionError(
                f"{path}:{lineno}: field 'coherent': {len(votes)} judgement(s), but the lines before give {annotators}; "
                "every id needs the same annotators"
            )
        annotators = len(votes)
        out.append((lineno, obj["id"], votes))
    bench.judgement_space(annotators or 1)
    return out


def _scored_judgements(bench: Benchmark, split: str, path: Path, rows, allow_missing: bool):
    """:func:`scored_metric` for people's judgements: the paper's metric in the judgement space of
    one or two annotators (two: only agreed items counted, with agreement and Fleiss' kappa)."""
    examples = bench.load(split)
    position, notes = _matched(bench, split, path, examples, [(lineno, id_) for lineno, id_, _ in rows], allow_missing)
    annotators = len(rows[0][2])
    space = bench.judgement_space(annotators)
    metric = bench.scorer(examples, space)
    codes = [sum(int(v) << (annotators - 1 - k) for k, v in enumerate(votes)) for _, _, votes in rows]
    metric.update(torch.tensor([position[id_] for _, id_, _ in rows], dtype=torch.long), torch.tensor(codes, dtype=torch.long))
    values = {k: float(v) for k, v in metric.compute().items()}
    if annotators == 2:
        notes.append(f"two annotators: only the {int(values['agreed'])} of {int(values['judged'])} items they agree on are counted")
    return Scored(bench.name, split, str(path), len(examples), len(rows), space, values, notes), metric


def _scored_cloze(bench: Benchmark, split: str, path: Path, allow_missing: bool):
    """:func:`scored_metric` for cloze probes (negated LAMA): the file must be prediction lines a
    negtrain run wrote, which carry per probe the model's top-1s, rank correlation and ranks (see
    :mod:`negtrain.metrics.cloze`); every number is recomputed from them as the run computed it."""
    from negtrain.metrics.cloze import NegatedLamaMetric  # torch-side metric, imported when scoring

    rows = list(jsonl_rows(path, read_lines(path), PredictionError))
    if not rows:
        raise PredictionError(f"{path}: no predictions")
    for row in rows:
        if not isinstance(row.fields.get("id"), str):
            raise PredictionError(f"{path}:{row.line}: no string 'id' field")
        if "skipped" not in row.fields and "top1" not in row.fields:
            raise PredictionError(
                f"{path}:{row.line}: {bench.name} is scored from the prediction lines a negtrain run writes "
                "(with 'top1', 'common_top1', 'rank_correlation' per probe): its metrics need the model's "
                "scores over the vocabulary, not one predicted word"
            )
    examples = bench.load(split)
    position, notes = _matched(bench, split, path, examples, [(row.line, row.fields["id"]) for row in rows], allow_missing)
    line_of = {position[row.fields["id"]]: row.line for row in rows}

    def describe(pos: int, message: str):
        raise PredictionError(f"{path}:{line_of[pos]}: {message}")

    metric, index, table = NegatedLamaMetric.from_lines(examples, [(position[row.fields["id"]], row.fields) for row in rows], describe)
    metric.update(index, table)
    values = {k: float(v) for k, v in metric.compute().items()}
    return Scored(bench.name, split, str(path), len(examples), len(rows), (), values, notes), metric


def check_shape(path: Path, examples: int, name: str) -> None:
    """Before a line is parsed: a predictions file (a regular file; a pipe is read as it comes)
    holds about one line per example, so one of over MAX_EXTRA_LINES more is refused in the time it
    takes to count its lines (its size first), never parsed whole; fewer are parsed, to name ids."""
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:  # read_lines names what cannot be read
        return
    if size is None:
        return
    too_many = f"; {name} has {examples:,} examples and a predictions file one line per example (another split's file, or lines repeated?)"
    if size > (examples + 1) * MAX_LINE_BYTES:
        raise PredictionError(f"{path}: {size:,} bytes, more than {examples + 1:,} lines of at most {MAX_LINE_BYTES:,} bytes{too_many}")
    with path.open("rb") as f:
        newlines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 22), b""))
    most = examples + MAX_EXTRA_LINES
    lines = 0  # far more line ends than examples: count the lines that are not blank, up to one too many
    with path.open("rb") as f:
        while newlines > most and lines <= most and (line := f.readline(MAX_LINE_BYTES + 1)):
            lines += bool(line.strip())
    if lines > most:
        raise PredictionError(f"{path}: {newlines:,} lines{too_many}")


def read_lines(path: Path) -> Iterator[str]:
    """The file's lines, decoded, read one at a time (a file of any size is never held whole). A
    regular file or a pipe (``<(...)``); no line over MAX_LINE_BYTES and no more than
    MAX_FILE_BYTES in all."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise PredictionError(f"predictions file not found: {path}") from None
    except OSError as exc:
        raise PredictionError(f"{path}: cannot read the predictions file ({exc.strerror or exc})") from exc
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket"}
    for test, kind in kinds.items():
        if test(mode):
            raise PredictionError(f"{path}: is {kind}, not a predictions file")
    total = 0
    try:
        with path.open("rb") as f:
            for lineno in itertools.count(1):
                line = f.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                if len(line) > MAX_LINE_BYTES:
                    raise PredictionError(f"{path}:{lineno}: line longer than {MAX_LINE_BYTES:,} bytes; not a predictions file?")
                total += len(line)
                if total > MAX_FILE_BYTES:
                    raise PredictionError(f"{path}: more than {MAX_FILE_BYTES:,} bytes; not a predictions file?")
                try:
                    yield line.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise PredictionError(f"{path}:{lineno}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)") from exc
    except OSError as exc:
        raise PredictionError(f"{path}: cannot read the predictions file ({exc.strerror or exc})") from exc


def _space(bench: Benchmark, rows, path: Path) -> tuple[str, ...]:
    spaces = bench.spaces()
    for space in spaces:
        if all(label is None or nli.into(label, space) is not None for _, _, _, label in rows):
            return tuple(space)
    coarsest = spaces[-1]
    lineno, _, pred, _ = next(r for r in rows if r[3] is not None and nli.into(r[3], coarsest) is None)
    raise PredictionError(
        f"{path}:{lineno}: prediction {pred!r} cannot be scored on {bench.name}, whose predictions "
        f"are labels of {' or '.join(str(list(s)) for s in spaces)}"
    )


def score_file(benchmark: str, split: str, path: Path, allow_missing: bool = False,
               bootstrap: int = 1000, bootstrap_seed: int = 0) -> Scored:
    """Score a predictions file; ``bootstrap`` resamples (0: none) with ``bootstrap_seed`` give each
    metric's ci95 (see negtrain/metrics/uncertainty.py)."""
    scored, metric = scored_metric(benchmark, split, path, allow_missing)
    scored.uncertainty = uncertainty_of(metric, bootstrap, bootstrap_seed, get_benchmark(benchmark).is_count)
    return scored


def scored_metric(benchmark: str, split: str, path: Path, allow_missing: bool = False):
    """The :class:`Scored` result and the metric that scored it (its ``last_outcomes`` hold the
    per-example state, for the bootstrap and for paired comparisons)."""
    bench = get_benchmark(benchmark)
    bench.check_split(split)
    check_shape(path, len(bench.load(split)), f"{bench.name}/{split}")
    if bench.answer_type is AnswerKind.CLOZE:
        return _scored_cloze(bench, split, path, allow_missing)
    judgements = read_judgements(path, bench) if bench.human_judgements else None
    if judgements is not None:
        return _scored_judgements(bench, split, path, judgements, allow_missing)
    rows = read_predictions(path, bench)  # malformed input is reported before any data is read
    examples = bench.load(split)
    position, notes = _matched(bench, split, path, examples, [(lineno, id_) for lineno, id_, _, _ in rows], allow_missing)
    scoring = PREDICTIONS_OF[bench.answer_type](bench, rows, examples, position, path, notes)
    # The one ending every kind shares: update, compute, and the result.
    index = torch.tensor([position[id_] for _, id_, _, _ in rows], dtype=torch.long)
    scoring.metric.update(index, scoring.predictions)
    values = {k: float(v) for k, v in scoring.metric.compute().items()}
    if scoring.note_after_compute and scoring.metric.note:
        notes.append(scoring.metric.note)
    return Scored(benchmark, split, str(path), len(examples), len(rows), scoring.space, values, notes), scoring.metric


@dataclass
class _Predictions:
    """What an answer kind makes of a predictions file's rows: the metric that scores them, the
    predictions as its ``update`` takes them, and the label space reported."""

    metric: Any
    predictions: torch.Tensor
    space: tuple[str, ...]
    #: Whether the metric's note is known only once it has computed (multiple choice).
    note_after_compute: bool = False


def _choice_predictions(bench, rows, examples, position, path, notes) -> _Predictions:
    """Multiple choice: each row's choice (an index or the choice's text), or every choice's
    log-likelihood when the lines carry them."""
    chosen = []
    for lineno, id_, pred, label in rows:
        choice = bench.choice_label(label, examples[position[id_]])
        if choice is None:
            options = list(bench.choices(examples[position[id_]]))
            raise PredictionError(
                f"{path}:{lineno}: prediction {pred!r} for {id_!r} is neither a choice index "
                f"{list(bench.labels)} nor one of its choices {options}"
                + ("; a completion is scored by people's judgements: give \"coherent\" (true/false, or "
                   "[first, second] for two annotators) per id" if bench.human_judgements else "")
            )
        chosen.append(int(choice))
    metric = bench.metric(examples)
    scores = _choice_loglikelihoods(rows, metric, position, path)
    predictions = scores if scores is not None else torch.tensor(chosen, dtype=torch.long)
    return _Predictions(metric, predictions, tuple(bench.labels), note_after_compute=True)


def _mark_empty(metric, rows, position) -> None:
    """The lines whose response was empty (``"empty": true``), counted as the run counted them."""
    empty = [position[id_] for row in rows if row.fields.get("empty") is True for id_ in (row[1],)]
    if empty:
        metric.mark_empty(torch.tensor(empty, dtype=torch.long))


def _text_predictions(bench, rows, examples, position, path, notes) -> _Predictions:
    """Free text: each answer right (1) or wrong (0) by the benchmark's rule; unreadable: UNPARSED."""
    metric = bench.metric(examples)
    metric.counts_unparsed = rows.generated
    _mark_empty(metric, rows, position)
    predictions = torch.tensor(
        [UNPARSED if text is None else int(bench.is_correct(text, examples[position[id_]])) for _, id_, _, text in rows],
        dtype=torch.long,
    )
    return _Predictions(metric, predictions, ())


def _label_predictions(bench, rows, examples, position, path, notes) -> _Predictions:
    """Labels: each row's label id in the label space the predictions are in (an open-vocabulary
    benchmark's space is every predicted and gold string)."""
    as_label: Callable[[str], str]
    if bench.open_vocabulary:
        space = tuple(sorted({label for *_, label in rows if label is not None} | {e.label for e in examples}))
        metric = bench.scorer(examples, space)
        as_label = str
    else:
        space = _space(bench, rows, path)
        metric = bench.scorer(examples, space)
        if metric.note:
            notes.append(metric.note)
        coarsened = sum(1 for *_, label in rows if label is not None and label not in space)
        if coarsened:
            notes.append(f"{coarsened} prediction(s) coarsened into {list(space)} (neutral/contradiction -> not_entailment)")

        def as_label(label: str) -> str:
            into = nli.into(label, space)
            # _space chose a space that every predicted label is in or coarsens into.
            assert into is not None
            return into

    label_id = {label: i for i, label in enumerate(space)}
    metric.counts_unparsed = rows.generated
    _mark_empty(metric, rows, position)
    predictions = torch.tensor([UNPARSED if label is None else label_id[as_label(label)] for *_, label in rows], dtype=torch.long)
    return _Predictions(metric, predictions, space)


#: How each answer kind turns a predictions file's rows into predictions (cloze probes and human
#: judgements are read by their own paths above: their lines hold more than one answer).
PREDICTIONS_OF: dict[AnswerKind, Callable[..., _Predictions]] = {
    AnswerKind.CHOICE: _choice_predictions,
    AnswerKind.TEXT: _text_predictions,
    AnswerKind.LABEL: _label_predictions,
}


def _choice_loglikelihoods(rows: list[PredictionLine], metric, position: dict[str, int], path: Path) -> torch.Tensor | None:
    """Every choice's log-likelihood from the lines (as a model run writes them), when every line
    has them: then acc and acc_norm are recomputed from them as the run computed them. A line's
    ``choice_chars``, if given, must be the benchmark's choice lengths."""
    if getattr(metric, "chars", None) is None or not all("loglikelihoods" in r.fields for r in rows):
        return None
    out = []
    for row in rows:
        lineno, id_ = row[0], row[1]
        ll, width = row.fields["loglikelihoods"], int((~torch.isnan(torch.as_tensor(metric.chars[position[id_]]))).sum())
        if not isinstance(ll, list) or len(ll) != width or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ll):
            raise PredictionError(f"{path}:{lineno}: 'loglikelihoods' must be a list of {width} numbers, one per choice, got {ll!r}")
        chars = row.fields.get("choice_chars")
        if chars is not None and list(chars) != [int(c) for c in metric.chars[position[id_], :width]]:
            raise PredictionError(f"{path}:{lineno}: 'choice_chars' {chars!r} are not the lengths of {id_!r}'s choices "
                                  f"{[int(c) for c in metric.chars[position[id_], :width]]}")
        out.append([float(x) for x in ll])
    return torch.tensor(out, dtype=torch.float64)


def _matched(bench: Benchmark, split: str, path: Path, examples, lines: list[tuple[int, str]],
             allow_missing: bool) -> tuple[dict[str, int], list[str]]:
    """Each example id's position in the split, after checking the file's ids (line, id): no
    duplicate, none unknown, none missing unless ``allow_missing`` (then a note says so)."""
    benchmark = bench.name
    position = {e.id: i for i, e in enumerate(examples)}
    first_line: dict[str, int] = {}
    duplicates: dict[str, list[int]] = {}  # id -> its first few lines (the message names a few, then counts)
    repeats: dict[str, int] = {}  # id -> on how many lines it is
    for lineno, id_ in lines:
        if id_ in first_line:
            kept = duplicates.setdefault(id_, [first_line[id_]])
            if len(kept) < 3:
                kept.append(lineno)
            repeats[id_] = repeats.get(id_, 1) + 1
        else:
            first_line[id_] = lineno
    if duplicates:
        shown = "; ".join(
            f"{_short(i)} (lines {', '.join(map(str, ls))}{f', ...; {repeats[i]} lines in all' if repeats[i] > len(ls) else ''})"
            for i, ls in list(duplicates.items())[:SHOW]
        )
        more = f"; ... ({len(duplicates) - SHOW} more)" if len(duplicates) > SHOW else ""
        raise PredictionError(f"{path}: {len(duplicates)} duplicate id(s): {shown}{more}")
    unknown = [id_ for id_ in first_line if id_ not in position]
    if unknown:
        raise PredictionError(
            f"{path}: {len(unknown)} id(s) not in {benchmark}/{split} (ids look like {examples[0].id!r}): "
            f"{_name(unknown)} (first at line {first_line[unknown[0]]})"
        )
    missing = [e.id for e in examples if e.id not in first_line]
    notes = []
    if missing and not allow_missing:
        raise PredictionError(
            f"{path}: {len(missing)} of {len(examples)} examples of {benchmark}/{split} have no prediction: "
            f"{_name(missing)}; predict every example, or pass --allow-missing to score only the predicted ones"
        )
    if missing:
        notes.append(
            f"--allow-missing: scored {len(examples) - len(missing)} of {len(examples)} examples; "
            f"{len(missing)} had no prediction, so these numbers are not comparable with full-split results"
        )
    return position, notes
