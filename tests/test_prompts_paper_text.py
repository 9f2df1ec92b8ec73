"""Every ScoNe-NLI prompt against the paper's own printed example, and the TINAD and CondaQA
templates against their papers' text, with no data needed.

ScoNe (She et al. 2023) prints each prompt of Appendix E for one example, premise "we didn't eat
pizza" and hypothesis "we didn't eat food", marking real newlines with ``\\n``. The expected texts
below are those prints, copied with their ``\\n`` marks (turned into newlines here), so a strategy
file that departs from the paper in a word, an order or a newline fails. Where the PDF breaks a
line without a ``\\n`` mark (E.4, before "Answer Yes or No.") the break is a space.
"""

from __future__ import annotations

import pytest

from negtrain.prompts.strategies import get_strategy

#: The example Appendix E prints every prompt for (lower case, as in the data).
PIZZA = {"premise": "we didn't eat pizza", "hypothesis": "we didn't eat food"}


def paper(text: str) -> str:
    """A prompt as Appendix E prints it: ``\\n`` marks are the newlines."""
    return text.replace("\\n", "\n")


ZERO_SHOT = {
    # E.1
    "conditional_q": r"Is it true that if we didn't eat pizza, then we didn't eat food?",
    # E.3
    "hypothesis_q": r"Assume that we didn't eat pizza. Is it then definitely true that we didn't eat food? Answer Yes or No.",
    # E.5
    "conditional_truth": r"If we didn't eat pizza, then we didn't eat food. Is this true?",
    # E.7
    "brown": r"C: We didn't eat pizza\nQ: We didn't eat food. Yes, No, or Maybe?",
    # E.9
    "structured": r"P: We didn't eat pizza\nH: We didn't eat food\nL:",
    # E.11
    "reasoning": (
        r"Logical and commonsense reasoning exam.\n\nExplain your reasoning in detail, then answer with Yes or No. Your answers should "
        r"follow this 4-line format:\n\nPremise: <a tricky logical statement about the world>.\nQuestion: <question requiring logical "
        r"deduction>.\nReasoning: <an explanation of what you understand about the possible scenarios>.\nAnswer: <Yes or No>.\n\n"
        r"Premise: we didn't eat pizza\nQuestion: Can we logically conclude for sure that we didn't eat food?\nReasoning: Let's think "
        r"logically step by step. The premise basically tells us that"
    ),
}

FEW_SHOT = {
    # E.2 (Q4 has no \n before "A4:" as printed)
    "conditional_q": (
        r"Q1: Is it true that if a not so tall person reading a paper is not currently sitting inside a building, then a not so tall person reading a paper is not currently sitting inside a club?\n"
        r"A1: Yes\n"
        r"\n"
        r"Q2: Is it true that if the man does not own a dog and does not own a cat, then the man does not own a retriever and does not own a cat?\n"
        r"A2: Yes\n"
        r"\n"
        r"Q3: Is it true that if a not so tall person reading a paper is not currently sitting inside a cabin, then a not so tall person reading a paper is not currently sitting inside a building?\n"
        r"A3: Maybe\n"
        r"\n"
        r"Q4: Is it true that if a not so tall person reading a paper is not currently sitting inside a casino, then a not so tall person reading a paper is not currently sitting inside a building? A4: Maybe\n"
        r"\n"
        r"Q: Is it true that if we didn't eat pizza, then we didn't eat food?\n"
        r"A:"
    ),
    # E.4
    "hypothesis_q": (
        r"Q1: Assume that a not so tall person reading a paper is not currently sitting inside a building. Is it then definitely true that a not so tall person reading a paper is not currently sitting inside a casino? Answer Yes or No.\n"
        r"A1: Yes\n"
        r"\n"
        r"Q2: Assume that the girl will not get a stuffed dog as a gift, but not because she failed the exam. Is it then definitely true that the girl will not get a stuffed pinscher as a gift, but not because she failed the exam? Answer Yes or No.\n"
        r"A2: Yes\n"
        r"\n"
        r"Q3: Assume that the girl will not get a stuffed shetland as a gift, but not because she failed the exam. Is it then definitely true that the girl will not get a stuffed dog as a gift, but not because she failed the exam? Answer Yes or No.\n"
        r"A3: No\n"
        r"\n"
        r"Q4: Assume that a not so tall person reading a paper is not currently sitting inside a monastery. Is it then definitely true that a not so tall person reading a paper is not currently sitting inside a building? Answer Yes or No.\n"
        r"A4: No\n"
        r"\n"
        r"Q: Assume that we didn't eat pizza. Is it then definitely true that we didn't eat food? Answer Yes or No.\n"
        r"A:"
    ),
    # E.6
    "conditional_truth": (
        r"C1: If the man does not own a dog and does not own a cat, then the man does not own a shetland and does not own a cat. Is this true?\n"
        r"A1: Yes\n"
        r"\n"
        r"C2: If a not so tall person reading a paper is not currently sitting inside a building, then a not so tall person reading a paper is not currently sitting inside a house. Is this true?\n"
        r"A2: Yes\n"
        r"\n"
        r"C3: If the man does not own a collie and does not own a cat, then the man does not own a dog and does not own a cat. Is this true?\n"
        r"A3: Maybe\n"
        r"\n"
        r"C4: If the man does not own a corgi and does not own a cat, then the man does not own a dog and does not own a cat. Is this true?\n"
        r"A4: Maybe\n"
        r"\n"
        r"C: If we didn't eat pizza, then we didn't eat food. Is this true?\n"
        r"A:"
    ),
    # E.8 (answers numbered A2..A5 after Q1..Q4, as printed)
    "brown": (
        r"C1: The man, who's eyes are not open, is not steering a car.\n"
        r"Q1: The man, who's eyes are not open, is not steering a sedan. Yes, No, or Maybe?\n"
        r"A2: Yes\n"
        r"\n"
        r"C2: A dog not on the playground did not catch any ball.\n"
        r"Q2: A dog not on the playground did not catch any volleyball. Yes, No, or Maybe?\n"
        r"A3: Yes\n"
        r"\n"
        r"C3: the man does not own a collie and does not own a cat.\n"
        r"Q3: the man does not own a dog and does not own a cat. Yes, No, or Maybe?\n"
        r"A4: Maybe\n"
        r"\n"
        r"C4: A not so tall person reading a paper is not currently sitting inside a inn.\n"
        r"Q4: A not so tall person reading a paper is not currently sitting inside a building. Yes, No, or Maybe?\n"
        r"A5: Maybe\n"
        r"\n"
        r"C: We didn't eat pizza\n"
        r"Q: We didn't eat food. Yes, No, or Maybe?\n"
        r"A:"
    ),
    # E.10
    "structured": (
        r"P1: The players who did not score did not have a ball.\nH1: The players who did not score did not have a baseball.\nL1: "
        r"entailment\n\nP2: the man does not own a dog and does not own a cat.\nH2: the man does not own a poodle and does not own a "
        r"cat.\nL2: entailment\n\nP3: the man does not own a terrier and does not own a cat.\nH3: the man does not own a dog and does "
        r"not own a cat.\nL3: neutral\n\nP4: the man does not own a husky and does not own a cat.\nH4: the man does not own a dog and "
        r"does not own a cat.\nL4: neutral\n\nP: We didn't eat pizza\nH: We didn't eat food\nL:"
    ),
}

#: E.11's instructions, then (E.12) "two demonstrations right before the test example".
E11_INSTRUCTIONS = ZERO_SHOT["reasoning"].split(r"Premise: we didn't eat pizza")[0]
E11_QUERY = "Premise: we didn't eat pizza" + ZERO_SHOT["reasoning"].split(r"Premise: we didn't eat pizza")[1]
E12 = {
    # E.12.1
    "no_negation": (
        r"Here are some examples of the kind of reasoning you should do:\n\n\nPremise: The students ate pizza\nQuestion: Can we "
        r"logically conclude for sure that the students ate food?\nReasoning: Let's think logically step by step. The premise basically "
        r"tells us that pizza is a type of food. Therefore, the premise that the students ate pizza entails that the students ate "
        r"food.\nAnswer: Yes\n\n\nPremise: The students ate food\nQuestion: Can we logically conclude for sure that the students ate "
        r"pizza?\nReasoning: Let's think logically step by step. The premise basically tells us that pizza is a type of food. Therefore, "
        r"the premise that the students ate food does not allow us to conclude that the students ate pizza. They might have eaten "
        r"something else.\nAnswer: No\n\n"
    ),
    # E.12.2
    "one_scoped": (
        r"Here are some examples of the kind of reasoning you should do:\n\n\nPremise: The students didn't eat any pizza\nQuestion: Can "
        r"we logically conclude for sure that the students didn't eat any food?\nReasoning: Let's think logically step by step. The "
        r"premise basically tells us that pizza is a type of food. Therefore, the premise that the students didn't eat any pizza does "
        r"not allow us to conclude that the students didn't eat any food. They might have eaten something else.\nAnswer: No\n\n\n"
        r"Premise: The students didn't eat any food\nQuestion: Can we logically conclude for sure that the students didn't eat any "
        r"pizza?\nReasoning: Let's think logically step by step. The premise basically tells us that pizza is a type of food. Therefore, "
        r"the premise that the students didn't eat any food entails that the students didn't eat any pizza.\nAnswer: Yes\n\n"
    ),
}


@pytest.mark.parametrize("name", sorted(ZERO_SHOT))
def test_scone_zero_shot_prompt_is_appendix_e_as_printed(name):
    assert get_strategy("scone", name).render(PIZZA) == paper(ZERO_SHOT[name])


@pytest.mark.parametrize("name", sorted(FEW_SHOT))
def test_scone_few_shot_prompt_is_appendix_e_as_printed(name):
    assert get_strategy("scone", name).paper_prompt(PIZZA, "one_scoped").text() == paper(FEW_SHOT[name])


@pytest.mark.parametrize(("subset", "block"), [
    # The two monotonicity types: lexical entailment upwards (as without negation) or reversed by
    # one scoping negation; see the readings in negtrain/prompts/scone.yaml.
    ("no_negation", "no_negation"), ("one_not_scoped", "no_negation"), ("two_not_scoped", "no_negation"),
    ("two_scoped", "no_negation"), ("one_scoped", "one_scoped"), ("one_scoped_one_not_scoped", "one_scoped"),
])
def test_scone_few_shot_reasoning_puts_e12s_block_between_e11s_instructions_and_the_example(subset, block):
    got = get_strategy("scone", "reasoning").paper_prompt(PIZZA, subset).text()
    assert got == paper(E11_INSTRUCTIONS + E12[block] + E11_QUERY)


def test_scone_answers_are_read_by_appendix_ds_rule():
    # Appendix D: 'If the response contains "yes" (case-insensitive), then we infer the label
    # entailment, else we infer neutral.'
    for name in (*ZERO_SHOT, *FEW_SHOT):
        answer = get_strategy("scone", name).answer
        assert answer.generates and answer.rule == "contains_yes"
        assert answer.read(" Yes") == "entailment" and answer.read("YES, it is.") == "entailment"
        assert answer.read(" Maybe") == "not_entailment" and answer.read(" neutral") == "not_entailment"


def test_tinad_prompts_are_section_4_2s():
    # §4.2: "Is the following statement True or False? {sentence}." and, for models fine-tuned
    # for conversation, "Is the following statement True or False? Answer only True or False. {sentence}."
    sentence = {"sentence": "Bills are never part of birds."}
    assert get_strategy("tinad", "plain").render(sentence) == "Is the following statement True or False? Bills are never part of birds."
    chat = get_strategy("tinad", "chat")
    assert chat.render(sentence) == "Is the following statement True or False? Answer only True or False. Bills are never part of birds."
    assert chat.chat == "required"
    assert get_strategy("tinad", "plain").verbalizer == {"True": "True", "False": "False"}


def test_condaqa_flan_t5_prompt_is_appendix_c2s():
    # Appendix C.2, FLAN-T5: "Input: Passage: {passage}\nQuestion: {question}\nGive the rationale
    # before answering." Output "{explanation} So the answer is {answer}."
    flan = get_strategy("condaqa", "flan_cot")
    fields = {"passage": "Botham did not bat again.", "question": "Did Botham bat twice?"}
    assert flan.render(fields) == "Passage: Botham did not bat again.\nQuestion: Did Botham bat twice?\nGive the rationale before answering."
    assert flan.answer.read("Botham batted once. So the answer is no.") == "no"
    # "This output form is the most common, but the model sometimes generates "(final) answer is",
    # "(final) answer:", etc., instead of "So the answer is"."
    assert flan.answer.read("He did not bat again. Final answer: no") == "no"
    assert flan.answer.read("He did not bat again. The answer is no.") == "no"


def test_tinad_protocol_lays_out_table_4():
    # Table 4's header: Coherence (All, W/o Distractor, W/ Distractor), Accuracy (All, W/o
    # Distractor: Affirmation, Negation, W/ Distractor: Affirmation, Negation).
    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.prompts.protocols import get_protocol

    columns = [metric for metric, _ in get_protocol("tinad-zeroshot").columns]
    assert columns == [
        "coherence", "coherence/input", "coherence/distractor",
        "accuracy", "accuracy/input_affirmation", "accuracy/input_negation",
        "accuracy/distractor_affirmation", "accuracy/distractor_negation",
    ]
    declared = {d.name for d in get_benchmark("tinad").reported_metrics}
    assert set(columns) <= declared


@pytest.mark.parametrize(("response", "answer"), [
    ("He batted once. So the answer is: no.", "no"),
    ("He batted once. So the final answer is: no", "no"),
    ("He batted once. Final answer: Don't know.", "Don't know"),
    ("He batted once. So the answer is no.", "no"),
])
def test_condaqa_chain_of_thought_answer_leaves_the_markers_colon_out(response, answer):
    # Appendix C.2: the answer follows "So the answer is", or "(final) answer is" / "(final)
    # answer:"; a colon after "is" is part of the marker, never of a free-text answer.
    for name in ("flan_cot", "cot_answer_only"):
        assert get_strategy("condaqa", name).answer.read(response) == answer


def test_an_empty_free_text_answer_is_unparsed_not_the_answer_nothing():
    # A CondaQA answer line or a ScoNe-NLG completion that is empty is counted in n_unparsed
    # (scored wrong), never read as the answer "".
    for benchmark, name in (("condaqa", "answer"), ("scone_nlg", "completion")):
        answer = get_strategy(benchmark, name).answer
        assert answer.read("") is None and answer.read("   ") is None
        assert answer.read(" don't know") == "don't know"
    assert get_strategy("scone_nlg", "completion").answer.read(" I said yes. ") == "I said yes."


@pytest.mark.parametrize(("name", "answer", "next_example"), [
    ("conditional_q", " Maybe", "Q5: Is it true that if the man's eyes are"),
    ("hypothesis_q", " No", "Q5: Assume that the man's eyes are"),
    ("conditional_truth", " Maybe", "C5: If the man's eyes are"),
    ("brown", " Maybe", "C5: The man, who's eyes are not open"),
    ("structured", " neutral", "P5: The man, who's eyes are not open"),
])
def test_scone_generation_stops_at_the_next_example_not_at_a_leading_blank_line(name, answer, next_example):
    from negtrain.models.generation import cut_at_stop

    rule = get_strategy("scone", name).answer
    # Few-shot: the model goes on into a fifth example ("eyes" holds "yes"); cut where it starts.
    assert rule.read(cut_at_stop(answer + "\n\n" + next_example, rule.stop)) == "not_entailment"
    # Zero-shot: a completion model's answer after a blank line is read, not cut to "" ("no").
    assert rule.read(cut_at_stop("\n\nYes, that follows.", rule.stop)) == "entailment"
