"""Plugins: a package installed beside negtrain adds a benchmark, its prompt strategy and a backend
through the entry-point group ``negtrain.plugins``, with no edit to negtrain.

The plugin is tests/fixtures/example_plugin (docs/extending.md shows the same files): a real
package with a pyproject.toml, installed with pip (offline: no dependencies, no build isolation)
into a folder of its own that the commands' subprocesses get on their path. Its benchmark,
tiny_nli, is six pairs in three contrast sets; its backend, cue_rule, answers "no" to a prompt with
"not" in it and "yes" to any other. By hand, on the six pairs:

  dog     plain    entailment      no cue -> entailment      right
  dog     negated  not_entailment  "not"  -> not_entailment  right
  apple   plain    entailment      no cue -> entailment      right
  apple   negated  entailment      "not"  -> not_entailment  WRONG
  violin  plain    entailment      no cue -> entailment      right
  violin  negated  not_entailment  "not"  -> not_entailment  right

accuracy 5/6; plain 3/3, negated 2/3; consistency (every member of a set right) 2/3 sets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from negtrain.benchmarks.base import Example
from negtrain.benchmarks.monli import Monli
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark, register_benchmark, unregister_benchmark
from negtrain.core.errors import ConfigError
from negtrain.prompts.strategies import get_strategy, register_strategies, strategies, unregister_strategies

FIXTURE = REPO / "tests/fixtures/example_plugin"
DIST = "negtrain-example-plugin"


def _negtrain(args: list[str], cwd: Path, *path: Path) -> subprocess.CompletedProcess:
    """``python -m negtrain ARGS`` with ``path`` (installed plugins) ahead of this checkout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, path), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "negtrain", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin, installed by pip from a copy of the fixture (the checkout gets no build/)."""
    src = tmp_path_factory.mktemp("src") / "example_plugin"
    shutil.copytree(FIXTURE, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                           "--target", str(site), str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (site / "negtrain_example_plugin/tiny_nli_test.jsonl").is_file()  # the package data came along
    return site


def test_evaluate_list_and_recipes_show_what_the_plugin_added(plugin_site, tmp_path):
    listed = _negtrain(["evaluate", "--list", "--json"], tmp_path, plugin_site)
    assert listed.returncode == 0, listed.stderr
    rows = {r["benchmark"]: r for r in json.loads(listed.stdout)}
    tiny = rows["tiny_nli"]
    assert tiny["plugin"] == DIST and rows["scone"]["plugin"] is None
    assert tiny["splits"] == ["test"] and tiny["labels"] == ["entailment", "not_entailment"]
    assert list(tiny["strategies"]) == ["true_false"]
    assert tiny["families"]["causal_lm"]["supported"] and not tiny["families"]["mlm"]["supported"]

    text = _negtrain(["evaluate", "--list"], tmp_path, plugin_site).stdout
    assert f"\ntiny_nli (plugin {DIST})\n" in text
    assert re.search(rf"^backends \(--backend NAME\): hf, openai, transformers, cue_rule \(plugin {DIST}\)$", text, re.M)
    line = f"  {DIST} 0.1.0 (example): benchmark tiny_nli; strategies tiny_nli; backend cue_rule"
    assert line in text.splitlines()

    recipes = _negtrain(["recipes"], tmp_path, plugin_site)
    assert recipes.returncode == 0 and recipes.stdout.splitlines()[-1] == line and recipes.stderr == ""


def test_a_card_on_the_plugins_benchmark_strategy_and_backend_has_the_hand_computed_numbers(plugin_site, tmp_path):
    out = tmp_path / "card"
    done = _negtrain(["evaluate", "--model", "rules", "--backend", "cue_rule", "--benchmarks", "tiny_nli",
                      "--strategy", "true_false", "--out", str(out)], tmp_path, plugin_site)
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert (record["benchmark"], record["split"]) == ("tiny_nli", "test")
    assert record["metrics"] == {"accuracy": round(5 / 6, 6), "accuracy/plain": 1.0, "accuracy/negated": round(2 / 3, 6),
                                 "consistency": round(2 / 3, 6), "groups_scored": 3.0, "n": 6.0}
    assert record["requests"]["sent"] == 12  # one log-likelihood request per pair and label
    predictions = [json.loads(line) for line in next((out / "predictions").glob("tiny_nli-test*.jsonl")).read_text().splitlines()]
    assert [p["prediction"] == p["label"] for p in predictions] == [True, True, True, False, True, True]
    # The plugin's strategy made the prompt (its template, its transform: the hypothesis lowered).
    assert predictions[0]["prompt"] == "A dog is running in the park. Therefore, an animal is running. True or False?\nAnswer:"
    assert predictions[3]["response"] == {"entailment": -5.0, "not_entailment": 0.0}
    assert "tiny_nli" in (out / "card.md").read_text()


def _fake_distribution(site: Path, name: str, module: str, code: str) -> None:
    """A distribution as pip would leave it (a .dist-info with its entry point) and its module."""
    info = site / f"{name.replace('-', '_')}-0.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.2\n")
    (info / "entry_points.txt").write_text(f"[negtrain.plugins]\n{module} = {module}:register\n")
    (site / f"{module}.py").write_text(code)


def test_a_broken_plugin_is_one_line_and_adds_nothing_and_the_command_goes_on(tmp_path):
    site = tmp_path / "site"
    _fake_distribution(site, "broken-import", "broken_import", "import not_a_module_anywhere\n\ndef register():\n    pass\n")
    # Registers a good benchmark first, then a backend of a shipped name: refused, and the
    # benchmark it had added is taken out again (a plugin is loaded whole or not at all).
    _fake_distribution(site, "clashing", "clashing", (
        "from negtrain.benchmarks.monli import Monli\n"
        "from negtrain.benchmarks.registry import register_benchmark\n"
        "from negtrain.config import register_backend\n\n"
        "class Clash(Monli):\n    name = 'clash_bench'\n\n"
        "def register():\n    register_benchmark(Clash)\n    register_backend('openai', 'clashing:open')\n"))
    done = _negtrain(["evaluate", "--list"], tmp_path, site)
    assert done.returncode == 0 and "scone" in done.stdout
    errors = done.stderr.splitlines()
    assert errors == [
        "negtrain: plugin broken_import (broken-import 0.2, broken_import:register) not loaded: "
        "ModuleNotFoundError: No module named 'not_a_module_anywhere'",
        "negtrain: plugin clashing (clashing 0.2, clashing:register) not loaded: "
        "register_backend: the table already has a backend 'openai' (ships with negtrain)",
    ]
    assert "clash_bench" not in done.stdout
    assert "  clashing 0.2 (clashing): not loaded: register_backend: the table already has a backend 'openai'" in done.stdout

    # A command that reads no table loads no plugin (no line), and importing negtrain loads none.
    for light in (["--help"], ["tiny-model", "--help"]):
        quiet = _negtrain(light, tmp_path, site)
        assert quiet.returncode == 0 and quiet.stderr == "", light
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    imported = subprocess.run([sys.executable, "-c", "import negtrain.cli, negtrain.config, negtrain.benchmarks.registry, "
                               "negtrain.prompts.strategies\nfrom negtrain.core import plugins\nprint(plugins._loaded)"],
                              env=env, capture_output=True, text=True, timeout=120)
    assert imported.stdout.strip() == "None" and imported.stderr == ""


def test_a_plugins_family_is_a_column_of_the_matrix_and_a_choice_of_evaluate_family(tmp_path):
    site = tmp_path / "site"
    _fake_distribution(site, "nli-twin", "nli_twin", (
        "from typing import Literal\n"
        "from negtrain.config import NliModelConfig, register_family\n\n"
        "class NliTwin(NliModelConfig):\n    family: Literal['nli_twin'] = 'nli_twin'\n\n"
        "def register():\n    register_family(NliTwin)\n"))
    done = _negtrain(["evaluate", "--list", "--json"], tmp_path, site)
    assert done.returncode == 0 and done.stderr == ""
    rows = {r["benchmark"]: r for r in json.loads(done.stdout)}
    assert rows["monli"]["families"]["nli_twin"]["supported"] and not rows["negated_lama"]["families"]["nli_twin"]["supported"]
    assert "  nli-twin 0.2 (nli_twin): family nli_twin" in _negtrain(["recipes"], tmp_path, site).stdout.splitlines()
    typo = _negtrain(["evaluate", "--model", "m", "--family", "nli_twim"], tmp_path, site)
    assert typo.returncode == 2 and "'nli_twin'" in typo.stderr and "Traceback" not in typo.stderr


class _Extra(Monli):
    name = "extra_nli"


def test_register_benchmark_refuses_a_shipped_name_and_suggests_a_registered_one():
    class Shadow(Monli):
        name = "scone"

    with pytest.raises(ConfigError, match=r"already has a benchmark 'scone' \(ships with negtrain\)"):
        register_benchmark(Shadow)
    with pytest.raises(ConfigError, match="expected a Benchmark subclass"):
        register_benchmark(Example)  # type: ignore[arg-type]  # the wrong kind of class, on purpose
    with pytest.raises(ConfigError, match="must be a word"):
        register_benchmark(type("Slashed", (Monli,), {"name": "a/b"}))
    with pytest.raises(ConfigError, match="ships with negtrain"):
        unregister_benchmark("scone")
    assert register_benchmark(_Extra) == "extra_nli"
    try:
        assert BENCHMARKS["extra_nli"] is _Extra and isinstance(get_benchmark("extra_nli"), _Extra)
        with pytest.raises(ConfigError, match=r"unknown benchmark 'extra_nl' \(did you mean 'extra_nli'\?\)"):
            get_benchmark("extra_nl")
        with pytest.raises(ConfigError, match="already has a benchmark 'extra_nli' \\(was added by a register_benchmark call\\)"):
            register_benchmark(_Extra)
    finally:
        unregister_benchmark("extra_nli")
    assert "extra_nli" not in BENCHMARKS


def test_register_strategies_joins_a_shipped_benchmarks_strategies_and_refuses_a_shipped_name(tmp_path):
    shipped = set(strategies("tinad"))
    added = tmp_path / "tinad_more.yaml"
    added.write_text("benchmark: tinad\ndefaults:\n  answer: {method: loglik}\n  verbalizer: {'True': ' yes', 'False': ' no'}\n"
                     "strategies:\n  yes_no:\n    source: a test\n    template: 'Is it so? {sentence} Yes or no?'\n")
    assert register_strategies(added) == "tinad"
    try:
        assert set(strategies("tinad")) == shipped | {"yes_no"}
        assert get_strategy("tinad", "yes_no").template == "Is it so? {sentence} Yes or no?"
        with pytest.raises(ConfigError, match=r"unknown strategy of 'tinad' 'yes_n' \(did you mean 'yes_no'\?\)"):
            get_strategy("tinad", "yes_n")
    finally:
        unregister_strategies("tinad")
    assert set(strategies("tinad")) == shipped

    clash = tmp_path / "tinad_clash.yaml"
    clash.write_text(added.read_text().replace("yes_no:", "plain:"))
    with pytest.raises(ConfigError, match=r"strategy 'plain' of 'tinad' ships with negtrain"):
        register_strategies(clash)
    assert set(strategies("tinad")) == shipped  # refused whole
    with pytest.raises(ConfigError, match="no such file"):
        register_strategies(tmp_path / "absent.yaml")


def test_the_docs_plugin_is_the_fixture_file_for_file():
    """docs/extending.md shows every file of the example plugin, verbatim: what a reader copies is
    what the tests install and score."""
    page = (REPO / "docs/extending.md").read_text(encoding="utf-8")
    shown = dict(re.findall(r"<!-- plugin file: (\S+) -->\n`\S+`:\n\n```\w+\n(.*?)```\n", page, re.S))
    files = {p.relative_to(FIXTURE).as_posix(): p.read_text(encoding="utf-8") for p in sorted(FIXTURE.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts and "egg-info" not in p.as_posix() and "build" not in p.parts}
    assert shown == files
