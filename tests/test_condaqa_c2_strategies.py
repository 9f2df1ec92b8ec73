"""CondaQA's Appendix C.2 formats as named strategies, against the paper's printed text, rendered on
every row of the mirrored test set; Figures 5 and 6 (images, not text) declared not reproducible,
and asking for them an error that says so; the protocol lists what it does not reproduce."""

from __future__ import annotations

import re

import pytest

from negtrain.cli import main
from negtrain.core.errors import ConfigError
from negtrain.prompts.strategies import get_strategy, not_reproducible, parse_strategies

#: Examples the paper prints (section 2, "Passage Selection": a noun cue and a particle cue), with
#: a question of the kind its crowdworkers wrote.
OXYGEN = {"passage": "In the absence of oxygen, the citric acid cycle ceases.", "question": "Does the citric acid cycle need oxygen?"}


def test_the_c2_formats_render_the_papers_text():
    # FLAN-T5: "Input: Passage: {passage}\nQuestion: {question}\nGive the rationale before answering."
    assert get_strategy("condaqa", "flan_cot").render(OXYGEN) == (
        "Passage: In the absence of oxygen, the citric acid cycle ceases.\nQuestion: Does the citric acid cycle need oxygen?\n"
        "Give the rationale before answering.")
    # CoT: "{test_instance} Answer: Let's think step by step." / "{explanation} So the answer is {answer}"
    cot = get_strategy("condaqa", "cot_answer_only")
    assert cot.render(OXYGEN).endswith("\nAnswer: Let's think step by step.")
    assert cot.shown_answer("YES") == "So the answer is YES."
    assert cot.answer.read("Without oxygen the cycle stops. So the answer is YES") == "YES"
    # UnifiedQA-v2: "{passage}\n{question}", normalised and lower-cased (the separator as UnifiedQA
    # was trained: the two characters backslash-n between spaces)
    assert get_strategy("condaqa", "unifiedqa").render(OXYGEN) == (
        "in the absence of oxygen, the citric acid cycle ceases. \\n does the citric acid cycle need oxygen?")


def test_every_row_of_the_mirrored_test_split_renders_with_the_invariants(data_dir):
    from negtrain.benchmarks.condaqa import Condaqa

    bench = Condaqa()
    rows = bench.load("test")
    assert len(rows) == 7240
    flan, cot, uqa = (get_strategy("condaqa", n) for n in ("flan_cot", "cot_answer_only", "unifiedqa"))
    for e in rows:
        fields = bench.prompt_fields(e)
        passage, question = fields["passage"], fields["question"]
        assert flan.render(fields) == f"Passage: {passage}\nQuestion: {question}\nGive the rationale before answering.", e.id
        text = cot.render(fields)
        assert text == f"Passage: {passage}\nQuestion: {question}\nAnswer: Let's think step by step.", e.id
        # a drawn shot's gold answer, shown in the form the rule reads, reads back as that answer
        assert cot.answer.read(text + " " + cot.shown_answer(e.label)) == e.label.strip(), e.id
        lowered = uqa.render(fields)
        assert lowered == lowered.lower() and "\n" not in lowered and "\t" not in lowered and "  " not in lowered, e.id
        left, sep, right = lowered.rpartition(" \\n ")
        assert sep and right == re.sub(r"\s+", " ", question).strip().lower(), e.id
        assert left == re.sub(r"\s+", " ", passage).strip().lower(), e.id


@pytest.mark.parametrize(("name", "figure", "nearest"), [("gpt3_figure5", "Figure 5", "answer"), ("cot_figure6", "Figure 6", "cot_answer_only")])
def test_figures_5_and_6_are_declared_not_reproducible(name, figure, nearest, capsys):
    declared = not_reproducible("condaqa")[name]
    assert figure in declared.source and "image" in declared.why and declared.nearest == nearest
    with pytest.raises(ConfigError, match=rf"strategy '{name}' of 'condaqa' is not reproducible: Appendix C.2, {figure}.*"
                                          rf"the nearest strategy here is '{nearest}'"):
        get_strategy("condaqa", name)
    assert main(["evaluate", "--model", "m", "--family", "causal_lm", "--benchmarks", "condaqa", "--strategy", name]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith(f"error: strategy '{name}' of 'condaqa' is not reproducible"), err
    assert main(["evaluate", "--list"]) == 0
    listing = capsys.readouterr().out
    assert f"    {name}: Appendix C.2, {figure}" in listing


def test_a_not_reproducible_entry_is_checked():
    raw = {"benchmark": "condaqa", "strategies": {"answer": {"template": "{passage}"}},
           "not_reproducible": {"fig": {"source": "Figure 5", "why": "an image", "nearest": "anwser"}}}
    with pytest.raises(ConfigError, match=r"not_reproducible.fig.nearest: no strategy 'anwser'.*did you mean 'answer'"):
        parse_strategies(raw, "condaqa.yaml")
    raw["not_reproducible"] = {"answer": {"source": "Figure 5", "why": "an image"}}
    with pytest.raises(ConfigError, match="'answer' is also a strategy of the file"):
        parse_strategies(raw, "condaqa.yaml")
    raw["not_reproducible"] = {"fig": {"source": "Figure 5"}}
    with pytest.raises(ConfigError, match="a source .* and why it cannot be reproduced"):
        parse_strategies(raw, "condaqa.yaml")


def test_protocol_md_lists_what_the_condaqa_protocol_does_not_reproduce():
    from negtrain.evaluation.protocol import protocol_markdown
    from negtrain.prompts.protocols import get_protocol

    text = protocol_markdown(get_protocol("condaqa-fewshot"), [], "m", 0, 0)
    section = text[text.index("## Not reproduced"):]
    assert "- Table 4's few-shot GPT-3 rows with Figure 5's prompt: Figure 5 is an image" in section
    assert "- Table 4's chain-of-thought rows with Figure 6's prompt: Figure 6 is an image and its 45 explanations" in section
    assert "- Table 4's few-shot UnifiedQA-v2 rows: the paper fine-tunes UnifiedQA-v2 on each split's nine shots" in section
    assert "unifiedqa/* here is zero-shot" in section
