"""ScoNe-NLG (She et al. 2023, section 4, Table 5, Appendix E.13): narratives to complete, where a
coherent ending depends on the presence and scope of a negation.

``scone_nlg/scone_nlg.csv`` holds 222 rows: ``sentence`` (the half-finished narrative the model
completes), ``hyper`` / ``hypo`` (the lexical pair it turns on), ``gold_outcome`` (the coherent kind
of ending, e.g. "No allergic reaction"; ``HYPO`` in it stands for the row's ``hypo``),
``prompt_type`` and ``frame_num`` (the story frame, 0-6). ``prompt_type`` is the condition, named
as in the paper's Table 5 (and as ScoNe-NLI's conditions):

- ``pos`` -> ``no_negation``;
- ``neg`` -> ``one_scoped`` (a negation whose scope decides the ending);
- ``not_scope`` -> ``one_not_scoped`` (a negation that does not take scope over the pair).

A *triplet* (the paper's 74 contrast sets) is the three rows with the same ``frame_num``, ``hyper``
and ``hypo``; the file defines them so (the three are consecutive rows, one per condition), and a
triplet without exactly one row of each condition is an error naming the row. Ids are
``scone_nlg/test/<row>`` (0-based data row, the file's unnamed first column).

Two ways to score it:

- **The paper's metric, from people's judgements.** The paper had two authors read each completion
  and judge whether it is coherent and compatible with the narrative; only the items they agree on
  are counted (216/222 zero-shot, Fleiss' kappa 0.84; 220/222 few-shot, 0.91). ``negtrain evaluate
  --benchmark scone_nlg --split test --predictions FILE`` with ``{"id": ..., "coherent": true}``
  per line (one annotator) or ``"coherent": [true, false]`` (two annotators) reports ``accuracy``
  (coherent / counted), ``accuracy/<condition>`` (Table 5's columns), ``consistency`` (see
  :class:`negtrain.metrics.scone_nlg.JudgedCompletions`), and with two annotators ``judged``,
  ``agreed`` and ``fleiss_kappa``.
- **An automatic proxy, not the paper's metric.** Each frame has two kinds of ending (e.g.
  "Allergic reaction" / "No allergic reaction"). A language model is asked which of the row's two
  endings it prefers as the continuation of the narrative, by summed log-likelihood (as NeQA's
  multiple choice, one space between narrative and ending); the right one is the gold outcome.
  Reported as ``outcome_choice_accuracy``, ``outcome_choice_accuracy/<condition>`` and
  ``outcome_choice_consistency``: never under the paper's names, because preferring the right kind
  of ending is not writing a coherent one.

The prompts are strategies in ``negtrain/prompts/scone_nlg.yaml`` (``completion``: the bare
narrative, or after E.13's demonstrations with ``shots: paper``; ``outcome_choice``: the proxy after
the same prompts); the ``scone-nlg`` protocol runs all four and writes the completions for judging.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example, choice_named, choice_syntax
from negtrain.benchmarks.rows import local, read_csv
from negtrain.benchmarks.files import RemoteFile
from negtrain.benchmarks.scone import check_row_number
from negtrain.core.errors import DataError
from negtrain.metrics.declared import count, score, scores

REPO = "selenashe/ScoNe"
PATH = "scone_nlg/scone_nlg.csv"
#: prompt_type -> condition, in Table 5's column order.
CONDITIONS = {"pos": "no_negation", "neg": "one_scoped", "not_scope": "one_not_scoped"}
COLUMNS = ("sentence", "hyper", "hypo", "gold_outcome", "prompt_type", "frame_num")

#: The label space of the proxy: the index of the chosen ending among the frame's two.
OUTCOMES = ("0", "1")
#: One annotator's judgement of a completion.
ONE_ANNOTATOR = ("incoherent", "coherent")
#: Two annotators' judgements, indexed by 2 * first + second (1 = coherent).
TWO_ANNOTATORS = ("incoherent/incoherent", "incoherent/coherent", "coherent/incoherent", "coherent/coherent")


def _paper_metrics() -> tuple:
    names = ["accuracy", *(f"accuracy/{c}" for c in CONDITIONS.values()), "consistency"]
    return (
        *scores(names, space=ONE_ANNOTATOR, also_in=[TWO_ANNOTATORS]),
        score("fleiss_kappa", space=TWO_ANNOTATORS),
        count("judged", space=TWO_ANNOTATORS),
        count("agreed", space=TWO_ANNOTATORS),
    )


class SconeNlg(Benchmark):
    name = "scone_nlg"
    splits = ("test",)
    labels = OUTCOMES
    prediction_spaces = (OUTCOMES, ONE_ANNOTATOR, TWO_ANNOTATORS)
    human_judgements = True
    answer_type = AnswerKind.CHOICE
    input_names = ("sentence",)
    target_delimiter = " "
    reported_metrics = (
        *scores(
            ["outcome_choice_accuracy", *(f"outcome_choice_accuracy/{c}" for c in CONDITIONS.values()), "outcome_choice_consistency"],
            space=OUTCOMES,
        ),
        *_paper_metrics(),
        count("groups_scored"),
        count("n"),
    )
    how_scored = {
        "seq2seq": "proxy: which of the frame's two endings has the higher log-likelihood as the decoder output (outcome_choice_*); the paper's metric needs human judgements",
        "causal_lm": "proxy: which of the frame's two endings has the higher log-likelihood as the narrative's continuation (outcome_choice_*); the paper's metric needs human judgements",
    }
    refuses = {
        "nli": "narratives to complete, not premise/hypothesis pairs",
    }
    prediction_help = (
        "an ending index (0 or 1) or the text of one of the frame's two endings (the outcome_choice proxy); "
        "people's judgements of completions go in \"coherent\": true/false, or [first, second] for two annotators"
    )
    citation = (
        "She, Potts, Bowman, Geiger (2023). ScoNe: Benchmarking Negation Reasoning in Language "
        "Models With Fine-Tuning and In-Context Learning. ACL 2023."
    )

    def files(self, split: str) -> list[RemoteFile]:
        return [RemoteFile(REPO, PATH)]

    def read(self, split: str) -> list[Example]:
        rows = list(read_csv(local(self.files(split)[0]), required=COLUMNS))
        for row in rows:
            check_row_number(row)  # the id is the row number: the index column must say the same
        outcomes = _frame_outcomes(rows)
        triplets: dict[tuple[int, str, str], dict[str, Any]] = {}
        examples = []
        for row in rows:
            kind = row.text("prompt_type")
            condition = CONDITIONS.get(kind)
            if condition is None:
                raise row.error("prompt_type", f"expected one of {list(CONDITIONS)}, got {kind!r}")
            frame, hyper, hypo = _frame(row), row.text("hyper"), row.text("hypo")
            members = triplets.setdefault((frame, hyper, hypo), {})
            if kind in members:
                raise row.error(
                    "prompt_type",
                    f"a second {kind!r} row for the triplet (frame {frame}, {hyper!r}/{hypo!r}); the first is at line {members[kind].line}",
                )
            members[kind] = row
            endings = tuple(o.replace("HYPO", hypo).replace("HYPER", hyper) for o in outcomes[frame])
            examples.append(
                Example(
                    id=f"{self.name}/{split}/{row.index}",
                    inputs=(row.text("sentence"),),
                    label=str(outcomes[frame].index(row.text("gold_outcome"))),
                    subset=condition,
                    group=f"{frame}/{hyper}/{hypo}",
                    meta={"outcomes": endings, "frame": frame, "hyper": hyper, "hypo": hypo, "line": row.line},
                )
            )
        for (frame, hyper, hypo), members in triplets.items():
            if len(members) != len(CONDITIONS):
                row = next(iter(members.values()))
                lacking = [k for k in CONDITIONS if k not in members]
                raise row.error(
                    "prompt_type",
                    f"the triplet (frame {frame}, {hyper!r}/{hypo!r}) lacks its {', '.join(map(repr, lacking))} row; "
                    "every triplet needs one row per condition (pos, neg, not_scope)",
                )
        return examples

    # -- the proxy: what the language-model families score -------------------------------------

    def context(self, example: Example) -> str:
        return example.inputs[0]

    def choices(self, example: Example) -> tuple[str, ...]:
        return tuple(example.meta["outcomes"])

    def choice_label(self, value: str, example: Example) -> str | None:
        return choice_named(value, OUTCOMES, example.meta["outcomes"])

    def normalize_prediction(self, value: Any) -> str | None:
        return choice_syntax(value)

    def judgement_space(self, annotators: int) -> tuple[str, ...]:
        if annotators not in (1, 2):
            raise DataError(f"{self.name}: judgements of {annotators} annotators; give one or two per id")
        return ONE_ANNOTATOR if annotators == 1 else TWO_ANNOTATORS

    # -- metrics --------------------------------------------------------------------------------

    def completions_metric(self, examples: Sequence[Example]):
        """What a protocol's completions report before they are judged: ``n`` (see
        :class:`negtrain.metrics.scone_nlg.CompletionsWritten`)."""
        from negtrain.metrics.scone_nlg import CompletionsWritten

        return CompletionsWritten(num_examples=len(examples))

    def metric(self, examples: Sequence[Example], predicted_labels: Sequence[str] = OUTCOMES):
        from negtrain.metrics.scone_nlg import JudgedCompletions, OutcomeChoice  # torch: imported when scoring

        subsets, groups = [e.subset for e in examples], [e.group for e in examples]
        order = tuple(CONDITIONS.values())
        if tuple(predicted_labels) == OUTCOMES:
            return OutcomeChoice([int(e.label) for e in examples], subsets, groups, subset_order=order)
        annotators = 1 if tuple(predicted_labels) == ONE_ANNOTATOR else 2
        return JudgedCompletions(subsets, groups, subset_order=order, annotators=annotators)


def _frame(row) -> int:
    raw = row.text("frame_num")
    if not raw.strip().isdigit():
        raise row.error("frame_num", f"expected a frame number (0, 1, ...), got {raw!r}")
    return int(raw)


def _frame_outcomes(rows) -> dict[int, tuple[str, ...]]:
    """Per frame, its two kinds of ending, in the order they first appear in the file."""
    seen: dict[int, list[str]] = {}
    first_line: dict[int, int] = {}
    for row in rows:
        frame = _frame(row)
        first_line.setdefault(frame, row.line)
        outcome = row.text("gold_outcome")
        endings = seen.setdefault(frame, [])
        if outcome not in endings:
            if len(endings) == 2:
                raise row.error(
                    "gold_outcome",
                    f"a third ending {outcome!r} in frame {frame}, which already has {endings[0]!r} and {endings[1]!r}",
                )
            endings.append(outcome)
    for frame, endings in seen.items():
        if len(endings) != 2:
            raise DataError(
                f"{rows[0].path}:{first_line[frame]}: field 'gold_outcome': frame {frame} has one ending "
                f"({endings[0]!r}); the outcome_choice proxy needs the frame's two"
            )
    return {frame: tuple(endings) for frame, endings in seen.items()}
