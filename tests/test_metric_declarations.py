"""One declaration per metric: for every benchmark, and every label space its predictions may be
in, the names it declares (``Benchmark.reported_metrics``) are exactly the names its metric
computes; every declaration says which way is better and whether it is a count; and every reader
(selection, recorder, report, model card, sweeps, evaluate --list) takes these facts from it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import FIXTURES
from negtrain.benchmarks.base import Benchmark
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark
from negtrain.core.errors import ConfigError
from negtrain.metrics.base import MISSING
from negtrain.metrics.declared import Declared, count, find, score
from tinad_fixture import easy_rows, write_split

#: The split each benchmark is checked on (any split works; small ones keep the test fast).
SPLITS = {
    "scone": "test", "scone_nlg": "test", "monli": "test", "mnli": "validation_matched", "negnli-rte": "all", "negnli-snli": "all",
    "negnli-mnli": "all", "nannli": "test", "condaqa": "dev", "tinad": "test", "negated_probes": "test",
    "neqa": "test", "neqa-lettered": "test", "negated_lama": "test", "negated_lama-high_ranked": "test",
    "negated_lama-low_ranked": "test", "blimp-npi": "all", "nubench": "test", "nevir": "test",
}


@pytest.fixture
def all_data(data_dir, tmp_path, monkeypatch):
    """The mirror, the repository's small fixtures (MNLI, probes), and a TINAD split written here."""
    write_split(tmp_path, "test", easy_rows(3))
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", os.pathsep.join([str(tmp_path), str(FIXTURES / "data"), str(data_dir)]))


def _computed(bench: Benchmark, examples, space) -> list[str]:
    metric = bench.scorer(examples, space)
    return list(metric.score(np.full(metric.num_examples, MISSING)))


def _cases():
    for name, cls in BENCHMARKS.items():
        for space in cls.prediction_spaces or (tuple(cls.labels) if cls.labels else None,):
            yield pytest.param(name, space, id=f"{name}-{'/'.join(space) if space else 'tokens'}")


def test_every_registered_benchmark_is_checked():
    assert set(SPLITS) == set(BENCHMARKS)


@pytest.mark.parametrize("name,space", list(_cases()))
def test_declared_names_are_what_the_metric_computes(all_data, name, space):
    bench = get_benchmark(name)
    examples = bench.load(SPLITS[name])
    computed = _computed(bench, examples, space)
    declared = bench.declared_in(space) if space is not None else bench.reported_metrics
    undeclared = [k for k in computed if find(declared, k) is None]
    assert not undeclared, f"{name}: computed but not declared: {undeclared}"
    never = [d.name for d in declared if not any(d.matches(k) for k in computed)]
    assert not never, f"{name}: declared but never computed in this label space: {never}"
    # Training's default selection metric (the first declared) is the first one scoring computes.
    assert declared[0].name == computed[0]


def test_a_selection_metric_is_found_by_its_declaration_even_inside_a_family():
    from negtrain.benchmarks.nannli import NanNli
    from negtrain.metrics.declared import declared_key, declared_keys

    sets = {"nannli/test": NanNli.reported_metrics, "scone/test": get_benchmark("scone").reported_metrics,
            "scone/test/v1": (score("only_in_v1"),)}
    assert declared_key(sets, "nannli/test/error_rate/construction/not + PP").name == "error_rate/construction/<Construction>"
    assert declared_key(sets, "scone/test/v1/only_in_v1").name == "only_in_v1"
    assert declared_key(sets, "scone/test/accuracy").higher_is_better
    assert declared_key(sets, "scone/test/v1/accuracy") is None and declared_key(sets, "scone/test/acuracy") is None
    assert "scone/test/accuracy" in declared_keys(sets)


def test_the_cue_corpus_declares_what_its_metric_computes():
    from negtrain.benchmarks.base import Example
    from negtrain.objectives.cue_masking import CueCorpus

    corpus = CueCorpus([Example("cue_corpus/heldout/0", ("Not a cat.",), "")])
    computed = list(corpus.metric(corpus.examples).score(np.full((1, 4), np.nan)))
    assert sorted(computed) == sorted(d.name for d in CueCorpus.reported_metrics)


def test_every_declaration_has_a_direction_and_a_kind():
    for name, cls in BENCHMARKS.items():
        assert cls.reported_metrics, name
        for d in cls.reported_metrics:
            assert isinstance(d, Declared) and d.kind in ("score", "count"), (name, d)
            assert d.kind == "score" or d.higher_is_better, f"{name}/{d.name}: a count has no better direction"
        names = [d.name for d in cls.reported_metrics]
        assert len(names) == len(set(names)), f"{name}: a metric declared twice"


def test_directions_and_kinds_are_read_from_the_declaration():
    nannli, probes = get_benchmark("nannli"), get_benchmark("negated_probes")
    assert nannli.is_higher_better("strict") and not nannli.is_higher_better("error_rate/construction/Verbal")
    assert not nannli.is_higher_better("error_rate/operation/Lexical change")
    assert not probes.is_higher_better("negated_top1_error")
    assert probes.is_count("n_negated") and get_benchmark("tinad").is_count("groups_lacking_cell")
    assert not get_benchmark("scone").is_count("accuracy/two_scoped")
    with pytest.raises(ConfigError, match=r"declares no metric 'acuracy' \(did you mean 'accuracy'\?\)"):
        get_benchmark("scone").is_higher_better("acuracy")


def test_an_exact_name_wins_over_a_family():
    declared = (score("accuracy/<type>"), count("accuracy/n"), score("accuracy"))
    assert find(declared, "accuracy/n").kind == "count"
    assert find(declared, "accuracy/verbal").name == "accuracy/<type>"
    assert find(declared, "accuracy/") is None and find(declared, "coherence") is None


def test_run_files_print_counts_as_integers_from_the_declaration():
    from negtrain.runs.reading import is_count

    assert is_count("tinad/test", "groups_lacking_cell") and is_count("negated_probes/test", "n_affirmative")
    assert is_count("cue_corpus/heldout", "n_cues") and not is_count("cue_corpus/heldout", "mlm_loss")
    assert not is_count("scone/test", "consistency")
    assert not is_count("no_such_benchmark/test", "n")  # a foreign eval set: shown as a score


def test_every_benchmark_has_one_headline_and_roles_come_from_the_declaration():
    from negtrain.metrics.declared import headline, role_of, with_role

    for name, cls in BENCHMARKS.items():
        roles = {d.name: d.role for d in cls.reported_metrics}
        assert "headline" in roles.values(), name
        assert all(roles[d.name] == "count" for d in cls.reported_metrics if d.kind == "count"), name
    assert role_of("consistency/scope") == "consistency" and role_of("accuracy/scope") == "score"
    assert headline(["n", "f1", "accuracy"]) == "accuracy"  # a record's preferred headline
    assert headline(["n", "strict"]) is None
    assert with_role(["accuracy", "coherence/input", "n", "strict"], "consistency") == ["coherence/input", "strict"]


def test_a_family_with_several_placeholders_matches_its_literal_parts_in_order():
    family = count("pattern/<NN>/confusion/<part>/<TP|FP|FN|TN>")
    assert family.matches("pattern/01/confusion/all/TP") and family.matches("pattern/11/confusion/non_verbal_input/FN")
    assert not family.matches("pattern/01/coherence/input") and not family.matches("confusion/all/TP")
    assert not family.matches("pattern/01/confusion/")  # a placeholder stands for some text, never none
    one = score("accuracy/<negation type>")  # one placeholder: the name's prefix and more, as before
    assert one.matches("accuracy/non_verbal_input") and not one.matches("accuracy/") and not one.matches("f1/x")
