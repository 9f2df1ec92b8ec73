"""ScoNe-NLI prompts on every real row, as the paper's demonstrations put rows into its templates.

She et al. (2023) print each prompt of Appendix E for one made-up example ("we didn't eat pizza"),
but the demonstrations of E.2, E.4, E.6, E.8 and E.10 quote dataset rows, and show how a row goes
in: embedded in the template's sentence, its first letter lowered and its final period dropped
(E.2, E.4, E.6: "A not so tall person ... building." appears as "if a not so tall person ...
building, then"); on its own line in Brown et al. and Structured, capitalised (E.7, E.9) with its
period kept (E.8, E.10), except Brown's hypothesis, embedded before ". Yes, No, or Maybe?".

The normalisation is written here again, independently of negtrain/prompts/scone.yaml, and each
expected prompt is the paper's printed prompt (tests/test_prompts_paper_text.py) with the example
replaced by the row so normalised. The rows are read from the CSV files here, not through the
benchmark's reader. Rendering only: no model.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import ConfigError
from negtrain.prompts.strategies import get_strategy, parse_strategies, strategies
from test_prompts_paper_text import E11_INSTRUCTIONS, E11_QUERY, E12, FEW_SHOT, ZERO_SHOT, paper

CONDITIONS = ("no_negation", "one_not_scoped", "one_scoped", "one_scoped_one_not_scoped", "two_scoped", "two_not_scoped")
STRATEGIES = ("structured", "brown", "conditional_q", "conditional_truth", "hypothesis_q", "reasoning")


def lowered(s: str) -> str:
    return s[:1].lower() + s[1:]


def capitalised(s: str) -> str:
    return s[:1].upper() + s[1:]


def without_period(s: str) -> str:
    # 84 train sentences end in ". " (a space after the period): the space goes with the period.
    s = s.rstrip()
    return s[:-1] if s.endswith(".") else s


def embedded(s: str) -> str:
    return without_period(lowered(s))


#: Per strategy: (how the premise goes in, how the hypothesis goes in, how Appendix E prints the example in it).
PAPER_NORMALISATION = {
    "conditional_q": (embedded, embedded, ("we didn't eat pizza", "we didn't eat food")),  # E.1, E.2
    "hypothesis_q": (embedded, embedded, ("we didn't eat pizza", "we didn't eat food")),  # E.3, E.4
    "conditional_truth": (embedded, embedded, ("we didn't eat pizza", "we didn't eat food")),  # E.5, E.6
    "reasoning": (embedded, embedded, ("we didn't eat pizza", "we didn't eat food")),  # E.11
    "brown": (capitalised, lambda s: capitalised(without_period(s)), ("We didn't eat pizza", "We didn't eat food")),  # E.7, E.8
    "structured": (capitalised, capitalised, ("We didn't eat pizza", "We didn't eat food")),  # E.9, E.10
}
#: E.12's demonstration block per condition (see the readings in negtrain/prompts/scone.yaml).
REASONING_BLOCK = {
    "no_negation": "no_negation", "one_not_scoped": "no_negation", "two_not_scoped": "no_negation",
    "two_scoped": "no_negation", "one_scoped": "one_scoped", "one_scoped_one_not_scoped": "one_scoped",
}
#: Malformed joins of a row and a template: a period before the template's comma or question mark,
#: two periods, a capitalised article after "if"/"that".
MALFORMED = re.compile(r"\.,|\.\?|\.\.|\b(?:if|that) (?:A|An|The)\b")


def csv_rows(data_dir: Path, split: str) -> list[tuple[str, int, str, str]]:
    """(condition, row, premise, hypothesis) of every row of the split's six files, as in the file."""
    out = []
    for condition in CONDITIONS:
        suffix = "" if condition == "one_scoped" else "_edited"
        path = data_dir / f"selenashe/ScoNe/scone_nli/{split}/{condition}.csv"
        with path.open(encoding="utf-8", newline="") as f:
            for i, row in enumerate(csv.DictReader(f)):
                out.append((condition, i, row[f"sentence1{suffix}"], row[f"sentence2{suffix}"]))
    return out


def expected(name: str, premise: str, hypothesis: str, condition: str, fewshot: bool) -> str:
    """The paper's printed prompt with its example replaced by the row, normalised as the paper does."""
    norm_p, norm_h, (example_p, example_h) = PAPER_NORMALISATION[name]
    if name == "reasoning" and fewshot:
        printed = paper(E11_INSTRUCTIONS + E12[REASONING_BLOCK[condition]] + E11_QUERY)
    else:
        printed = paper((FEW_SHOT if fewshot else ZERO_SHOT)[name])
    assert printed.count(example_p) == 1 and printed.count(example_h) == 1
    return printed.replace(example_p, norm_p(premise)).replace(example_h, norm_h(hypothesis))


def test_every_test_row_every_strategy_zero_and_few_shot_is_the_papers_prompt(data_dir):
    rows = csv_rows(data_dir, "test")
    assert len(rows) == 1200
    bench = get_benchmark("scone")
    examples = bench.load("test")
    assert [(e.subset, e.inputs) for e in examples] == [(c, (p, h)) for c, _, p, h in rows]
    assert sorted(strategies("scone")) == sorted(STRATEGIES)
    # The rows the normalisation must change are there: capitals, final periods.
    assert sum(p[:1].isupper() for _, _, p, _ in rows) == 940
    assert sum(p.endswith(".") or h.endswith(".") for _, _, p, h in rows) == 1072
    wrong, malformed, checked = [], [], 0
    for name in STRATEGIES:
        strategy = get_strategy("scone", name)
        for e, (condition, _i, p, h) in zip(examples, rows, strict=False):
            fields = bench.prompt_fields(e)
            for fewshot, got in ((False, strategy.render(fields)), (True, strategy.paper_prompt(fields, e.subset).text())):
                checked += 1
                if got != expected(name, p, h, condition, fewshot):
                    wrong.append((name, fewshot, e.id, got))
                if MALFORMED.search(got):
                    malformed.append((name, fewshot, e.id, MALFORMED.search(got).group()))
    assert checked == 1200 * 6 * 2
    assert wrong == [], f"{len(wrong)} prompts differ from the paper's normalisation, first: {wrong[:1]}"
    assert malformed == [], f"{len(malformed)} malformed prompts, first: {malformed[:1]}"


def test_the_malformed_pattern_finds_the_prompts_the_rows_gave_as_they_are():
    # The check above can fail: the raw row, put in as it is, is caught.
    raw = "A person reading a paper is sitting inside a building, not drinking tea."
    assert MALFORMED.search(f"Is it true that if {raw}, then {raw}?")
    assert MALFORMED.search(f"Assume that {raw}. Is it then definitely true that {raw}?")
    assert MALFORMED.search(f"If {raw}, then {raw}. Is this true?")
    assert MALFORMED.search(f"Can we logically conclude for sure that {raw}?")
    assert not MALFORMED.search(f"Is it true that if {embedded(raw)}, then {embedded(raw)}?")


#: The rows Appendix E's demonstrations quote, all of test/one_scoped_one_not_scoped.csv, in the
#: printed order (found by searching both splits for each demonstration's sentences).
DEMONSTRATION_ROWS = {
    "conditional_q": [122, 38, 105, 99],  # E.2
    "hypothesis_q": [98, 74, 73, 113],  # E.4
    "conditional_truth": [48, 96, 33, 45],  # E.6
    "brown": [198, 170, 33, 159],  # E.8
    "structured": [174, 34, 43, 13],  # E.10
}
#: E.8 and E.10 print these rows, lower case in the data ("the man does not own a collie ..."),
#: as they are, where E.7 and E.9 show the scored example capitalised; the demonstrations stay as
#: printed, and the scored row is capitalised (see negtrain/prompts/scone.yaml).
PRINTED_UNCAPITALISED = {("brown", 3), ("structured", 2), ("structured", 3), ("structured", 4)}


def _unnumbered(block: str) -> str:
    """A printed demonstration with its labels unnumbered ("Q1:" -> "Q:"), the scored example's form."""
    return re.sub(r"(^|\n)([A-Z])\d: ", r"\1\2: ", block)


def _lower_line_starts(text: str) -> str:
    return re.sub(r"(^|\n)([A-Z]): ([A-Z])", lambda m: f"{m[1]}{m[2]}: {m[3].lower()}", text)


def test_e2_e4_e6_e8_e10_demonstrations_are_their_dataset_rows_put_in_by_the_same_transform(data_dir):
    rows = {i: (p, h) for c, i, p, h in csv_rows(data_dir, "test") if c == "one_scoped_one_not_scoped"}
    bench = get_benchmark("scone")
    gold = {e.id: e.label for e in bench.load("test")}
    answer_label = {"Yes": "entailment", "Maybe": "not_entailment", "No": "not_entailment", "entailment": "entailment", "neutral": "not_entailment"}
    uncapitalised = set()
    for name, indices in DEMONSTRATION_ROWS.items():
        strategy = get_strategy("scone", name)
        blocks = paper(FEW_SHOT[name]).split("\n\n")[:4]
        for n, (block, i) in enumerate(zip(blocks, indices, strict=False), start=1):
            premise, hypothesis = rows[i]
            rebuilt = strategy.render({"premise": premise, "hypothesis": hypothesis})
            printed = _unnumbered(block)
            if rebuilt not in printed:
                # Only the first letter's case may differ, and only where the row is lower case.
                assert _lower_line_starts(rebuilt) in printed and premise[:1].islower(), (name, n, rebuilt, printed)
                uncapitalised.add((name, n))
            assert answer_label[printed.rsplit(": ", 1)[1]] == gold[f"scone/test/one_scoped_one_not_scoped/{i}"]
    assert uncapitalised == PRINTED_UNCAPITALISED
    # E.2, E.4, E.6 hold rows with a capital and a period: the transform, not the row, matches them.
    e2_row = rows[122][0]
    assert e2_row == "A not so tall person reading a paper is not currently sitting inside a building."
    assert f"if {e2_row}," not in paper(FEW_SHOT["conditional_q"])
    assert "if a not so tall person reading a paper is not currently sitting inside a building, then" in paper(FEW_SHOT["conditional_q"])


def test_e12_quotes_no_dataset_row_and_no_row_starts_with_a_name(data_dir):
    # E.12's demonstrations ("The students ate pizza", ...) are in neither split, so E.11's query
    # decides how a reasoning premise goes in (lower case, no period). And lowering the first letter,
    # the paper's rule, never lowers a name: every sentence of both splits starts with one of these.
    first_words, students = set(), 0
    for split in ("train", "test"):
        for _, _, p, h in csv_rows(data_dir, split):
            first_words |= {p.split(" ")[0], h.split(" ")[0]}
            students += "student" in (p + h).lower()
    assert students == 0
    assert first_words == {"The", "the", "A", "a", "There", "It", "To", "People", "Two", "Two,", "This", "Not", "Some", "Some,", '"a'}


def test_drawn_shots_put_their_rows_in_the_same_way(data_dir):
    # --shots K shows train rows as solved zero-shot prompts, through the causal family's prompt builder.
    from negtrain.config import FAMILY_SECTIONS
    from negtrain.models.prompting import PromptSettings, prompts_with_shots

    bench = get_benchmark("scone")
    train = {e.id: e for e in bench.load("train")}
    scored = bench.load("test")[:20]
    prompts, ids = prompts_with_shots(bench, "test", scored, PromptSettings(strategy="hypothesis_q", shots=3),
                                      FAMILY_SECTIONS["causal_lm"](name="tiny"), seed=0)
    changed = 0
    for prompt, picks, e in zip(prompts, ids, scored, strict=False):
        assert prompt.query == expected("hypothesis_q", *e.inputs, e.subset, fewshot=False)
        for (question, _), shot_id in zip(prompt.shots, picks, strict=False):
            p, h = train[shot_id].inputs
            assert question == expected("hypothesis_q", p, h, train[shot_id].subset, fewshot=False)
            changed += question != f"Assume that {p}. Is it then definitely true that {h}? Answer Yes or No."
    assert changed > 0  # the drawn rows needed the normalisation


def test_a_named_transform_is_its_steps_in_order_and_is_checked_when_the_file_loads():
    def parse(named, transforms):
        raw = {"benchmark": "x", "named_transforms": named, "strategies": {"s": {"template": "<{a}>", "transforms": {"a": transforms}}}}
        return parse_strategies(raw, "x.yaml")["s"]

    clause = {"clause": {"steps": ["lower_first", "no_final_period"], "source": "E.2"}}
    assert parse(clause, ["clause"]).render({"a": "The man owns a dog. "}) == "<the man owns a dog>"
    assert parse(clause, ["clause", "capitalize_first"]).render({"a": "the man owns a dog."}) == "<The man owns a dog>"
    with pytest.raises(ConfigError, match=r"x.yaml: named_transforms.clause.steps: unknown transform 'lower_frist' \(did you mean 'lower_first'\?\)"):
        parse({"clause": {"steps": ["lower_frist"], "source": "E.2"}}, ["clause"])
    with pytest.raises(ConfigError, match="unknown transform 'clase'.*did you mean 'clause'"):
        parse(clause, ["clase"])
    with pytest.raises(ConfigError, match="named_transforms.clause: no source"):
        parse({"clause": {"steps": ["lower_first"]}}, ["clause"])
    with pytest.raises(ConfigError, match="'lower_first' is already a transform"):
        parse({"lower_first": {"steps": ["no_final_period"], "source": "E.2"}}, ["lower_first"])
    with pytest.raises(ConfigError, match="unknown key 'step'.*did you mean 'steps'"):
        parse({"clause": {"step": ["lower_first"], "source": "E.2"}}, ["clause"])
    # ScoNe's file names its rule once and says where it is read from.
    named = get_strategy("scone", "conditional_q").named_transforms["embedded_sentence"]
    assert named.steps == ("lower_first", "no_final_period") and "E.2, E.4, E.6" in named.source


def test_scone_nlg_rows_go_in_as_they_are_as_e13_prints_them(data_dir):
    # ScoNe-NLG rows are unfinished narratives the model continues, not sentences put into a
    # template: E.13 prints its fourth demonstration, the dataset's row 0, exactly as the row is
    # (capital, no period), and the rows start with names ("Glen", "Jimmy") and "I", which must
    # keep their capitals. So the rows go in untransformed.
    with (data_dir / "selenashe/ScoNe/scone_nlg/scone_nlg.csv").open(encoding="utf-8", newline="") as f:
        rows = [r["sentence"] for r in csv.DictReader(f)]
    assert len(rows) == 222 and {r.split(" ")[0] for r in rows} >= {"Glen", "Jimmy", "I"}
    e13 = paper(
        r"Glen is not a fan of learning math. When he sees that his new high school requires that he take a geometry course, he is not pleased.\n\n"
        r"I saw John take his BMW to the store the other day, so when Suzy asked me if John owns a car, I said yes.\n\n"
        r"I've seen John with a dog that isn't very cute, so when Suzy asked me if John owns a pet, I said yes.\n\n"
        r"I recently confirmed that John is not allergic to any shellfish. So it makes sense that when we served shrimp"
    )
    assert e13.endswith("\n\n" + rows[0])
    bench = get_benchmark("scone_nlg")
    examples = bench.load("test")
    assert [e.inputs[0] for e in examples] == rows
    for name in ("completion", "outcome_choice"):
        strategy = get_strategy("scone_nlg", name)
        for e, row in zip(examples, rows, strict=False):
            fields = bench.prompt_fields(e)
            assert strategy.render(fields) == row
            assert strategy.paper_prompt(fields, e.subset).text() == e13 + "\n\n" + row
