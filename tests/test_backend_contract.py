"""The backend contract is declared, not probed: every ability the engine uses is a member of
:class:`negtrain.serving.backend.Backend` (or of the backend's row of the table,
:class:`negtrain.config.backends.BackendRow`), so the package holds no ``getattr``/``hasattr`` of
a backend object and names no backend outside the table (negtrain/config/backends.py): it asks
the row (``loads_here``, ``needs_server``, ``chat_template``) or the object. A backend that
loads its model here is one row too."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from negtrain.cli import main
from negtrain.config import BACKENDS, SHIPPED_BACKENDS, backend_row, register_backend, unregister_backend
from negtrain.core.errors import ConfigError
from negtrain.serving.backend import MEMBERS, Backend, BackendBase, BackendContext, open_backend

PACKAGE = Path(__file__).resolve().parents[1] / "negtrain"
TABLE = PACKAGE / "config" / "backends.py"
#: Where "transformers" names the Python library (its version, a model card's library_name), not a backend.
LIBRARY_NAME = {"models/gguf.py", "models/provenance.py", "release/export.py"}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != TABLE:
            yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _names_a_backend(node: ast.AST) -> bool:
    """Whether ``node`` is a backend object: a name or attribute called ``backend`` (or ``*_backend``)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "backend" or name.endswith("_backend")


def _backend_literals(node: ast.AST) -> list[str]:
    values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [v.value for v in values if isinstance(v, ast.Constant) and v.value in SHIPPED_BACKENDS]


def probes(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("getattr", "hasattr") and n.args and _names_a_backend(n.args[0])]


def compared_names(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
            and any(_backend_literals(side) for side in [n.left, *n.comparators])]


def test_the_checks_see_what_they_look_for():
    tree = ast.parse("getattr(backend, 'tokenizer', None)\nhasattr(self.backend, 'x')\ngetattr(model, 'config')\n"
                     "backend.name in ('hf', 'transformers')\nx == 'openai'\nx == 'other'\n")
    assert probes(tree) == [1, 2] and compared_names(tree) == [4, 5]


def test_no_module_probes_a_backend_or_compares_a_backend_name():
    found = [f"{path}:{line}: getattr/hasattr of a backend" for path, tree in _modules() for line in probes(tree)]
    found += [f"{path}:{line}: a backend's name compared" for path, tree in _modules() for line in compared_names(tree)]
    assert not found, "; ".join(found)


def test_no_module_names_a_backend_outside_the_table():
    found = []
    for path, tree in _modules():
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and n.value in SHIPPED_BACKENDS and not (path in LIBRARY_NAME and n.value == "transformers"):
                found.append(f"{path}:{n.lineno}: {n.value!r}")
            if isinstance(n, ast.Name) and n.id in ("IN_PROCESS", "IN_THIS_PROCESS"):
                found.append(f"{path}:{n.lineno}: {n.id}")
    assert not found, "a backend named outside negtrain/config/backends.py (ask its row): " + "; ".join(found)


def test_the_protocol_declares_every_member_the_engine_uses():
    declared = set(Backend.__annotations__) | {k for k in vars(Backend) if not k.startswith("_")}
    assert set(MEMBERS) == declared
    assert isinstance(BackendBase(), Backend)


def test_the_shipped_rows_say_what_they_are():
    assert [(n, r.loads_here, r.needs_server, r.chat_template) for n, r in BACKENDS.items() if n in SHIPPED_BACKENDS] == [
        ("hf", True, False, "tokenizer"), ("openai", False, True, "server"), ("transformers", True, False, "tokenizer")]


def test_a_backend_that_declares_too_little_is_refused_naming_what_it_lacks():
    class FourMembers:
        name = "four"

        def answer(self, requests, counts, allow_missing=False):
            return []

        def offers_prompt_logprobs(self):
            return True, ""

        def stop(self):
            pass

    register_backend("four", lambda context: FourMembers())
    try:
        with pytest.raises(ConfigError, match=r"backend four: its factory returned FourMembers, which lacks loads_here, tokenizer, "
                                              r"context, .*chat_text, load, cache_identity, check_run \(a backend whose model is not here subclasses "
                                              r"negtrain.serving.backend.BackendBase for them\)"):
            open_backend("four", BackendContext("m"))
    finally:
        unregister_backend("four")


def test_register_backend_declares_the_row():
    register_backend("mine", "my_package.backend:open_mine", loads_here=True, chat_template="tokenizer")
    try:
        row = backend_row("mine")
        assert (row.factory, row.loads_here, row.needs_server, row.chat_template) == ("my_package.backend:open_mine", True, False, "tokenizer")
    finally:
        unregister_backend("mine")
    with pytest.raises(ConfigError, match="chat_template is 'tokenizer', 'server' or None"):
        register_backend("odd", "m:f", chat_template="jinja")  # type: ignore[arg-type]  # the wrong value this test gives


def test_a_backend_that_loads_its_model_here_is_one_row(lm_env, tmp_path):
    """A row for the in-process factory under another name is a backend like hf: it takes
    --truncate left (refused for a backend that answers elsewhere) and scores the card hf scores,
    to the byte."""
    register_backend("local", "negtrain.serving.in_process:open_in_process", loads_here=True, chat_template="tokenizer")
    try:
        cards = {}
        for backend in ("hf", "local"):
            out = tmp_path / backend
            assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--backend", backend,
                         "--benchmarks", "tinad", "--truncate", "left", "--trainer.torch_threads=1", "--out", str(out)]) == 0
            cards[backend] = out
    finally:
        unregister_backend("local")
    files = sorted(p.name for p in (cards["hf"] / "predictions").glob("*.jsonl"))
    assert files and files == sorted(p.name for p in (cards["local"] / "predictions").glob("*.jsonl"))
    for name in files:
        assert (cards["hf"] / "predictions" / name).read_bytes() == (cards["local"] / "predictions" / name).read_bytes()
    hf, local = (json.loads((cards[b] / "metrics.jsonl").read_text().splitlines()[0]) for b in ("hf", "local"))
    assert hf["metrics"] == local["metrics"]


def test_the_cache_wrapper_keeps_each_answer_as_it_comes_and_reads_it_back(tmp_path):
    """One wrapper caches any backend that declares what keys its answers: an answer is kept the
    moment the backend hands it on, so a request that fails later loses none already answered, and
    a rerun asks only the rest; the cached answers' tokens are counted as the backend counts its own."""
    from negtrain.engine.requests import Answer, Counts, Generation
    from negtrain.serving.cache import ResponseCache
    from negtrain.serving.response_caching import CachingBackend

    class Upper(BackendBase):
        """A STAND-IN for a model: answers a prompt with it upper-cased, failing at ``fail_at``."""

        name = "upper"

        def __init__(self, fail_at: str | None = None) -> None:
            self.fail_at, self.asked = fail_at, []

        def cache_identity(self, request):
            return {"model": "upper-1"}

        def answer(self, requests, counts, allow_missing=False, on_answer=None):
            out = []
            for i, r in enumerate(requests):
                if r.prompt == self.fail_at:
                    raise ConfigError(f"{r.example}: failed")
                self.asked.append(r.prompt)
                out.append(Answer(text=r.prompt.upper(), tokens_out=1))
                counts.requests += 1
                counts.tokens_out += 1
                if on_answer is not None:
                    on_answer(i, out[-1])
            return out

    requests = [Generation(p, 4, example=f"b/s/{p}") for p in ("a", "b", "c")]
    cache = ResponseCache(tmp_path / "responses")
    failing = Upper(fail_at="c")
    with pytest.raises(ConfigError, match="b/s/c: failed"):
        CachingBackend(failing, cache).answer(requests, Counts())
    assert failing.asked == ["a", "b"]
    again, counts = Upper(), Counts()
    answers = CachingBackend(again, cache).answer(requests, counts)
    assert again.asked == ["c"] and [a.text for a in answers] == ["A", "B", "C"]
    assert (counts.requests, counts.cached, counts.tokens_out) == (1, 2, 3)
    # a backend that declares no identity (BackendBase's) is never cached
    class Plain(Upper):
        def cache_identity(self, request):
            return None

    plain = Plain()
    CachingBackend(plain, cache).answer(requests, Counts())
    assert plain.asked == ["a", "b", "c"]
    cache.close()


def test_the_cards_chat_template_line_is_the_rows():
    """What a card says of its chat template follows the row: hf and transformers (the tokenizer's,
    the same backend under two names: a run's model.chat_template holds on both), openai (the
    server's), a registered backend that declares nothing (its own business)."""
    from negtrain.config import validate_recipe
    from negtrain.evaluation.card_render import chat_template_line

    def line(backend: str, **model) -> str | None:
        server = {"server": {"base_url": "http://127.0.0.1:1/v1"}} if backend_row(backend).needs_server else {}
        return chat_template_line(validate_recipe({"description": "d", "model": {"name": "m", "family": "causal_lm", **model},
                                                   "data": {"eval": [{"benchmark": "scone", "split": "test"}]}, "evaluation": {"backend": backend, **server}}, "test"))

    run = "Chat template: the tokenizer's where it has one (the run's model.chat_template: true)."
    assert line("hf", chat_template=True) == line("transformers", chat_template=True) == run
    assert line("hf", chat=True) == line("transformers", chat=True) == "Chat template: the tokenizer's, applied to every prompt (--chat)."
    assert line("openai", chat=True) == "Chat template: the server's, through /v1/chat/completions (--chat)."
    register_backend("elsewhere", lambda context: None)
    try:
        assert line("elsewhere", chat=True) == "Chat template: whatever the elsewhere backend applies; prompts sent as written."
    finally:
        unregister_backend("elsewhere")
