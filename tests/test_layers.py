"""The floor rule of ARCHITECTURE.md: a module imports only from its own floor or below, and no
modules import each other round a loop. Imports inside functions count as much as top-level ones.

The floors are read from the table in ARCHITECTURE.md, so the document and the check cannot
drift apart. A miniature package in tests/fixtures/layers breaks the rule on purpose, to show
that each kind of mistake is caught.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from conftest import FIXTURES, REPO


@dataclass(frozen=True)
class Floor:
    number: int
    name: str
    prefixes: tuple[str, ...]  # "negtrain.io/" (a package and all below it) or "negtrain.cli" (one module)


def read_floors(markdown: Path) -> list[Floor]:
    """The floor table: the fenced block after the ``<!-- floors: ... -->`` marker."""
    text = markdown.read_text(encoding="utf-8")
    block = re.search(r"<!-- floors:.*?-->\s*```\n(.*?)```", text, re.S)
    assert block, f"{markdown}: no floor table (a fenced block after '<!-- floors: ... -->')"
    floors = []
    for line in block.group(1).splitlines():
        m = re.match(r"\s*(\d+)\s{2,}(.+?)\s{2,}(negtrain.*)$", line)
        if m:
            floors.append(Floor(int(m.group(1)), m.group(2), tuple(m.group(3).split())))
    return floors


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floor_of(module: str, floors: list[Floor]) -> Floor | None:
    """The floor whose most specific entry names ``module``."""
    best, best_len = None, -1
    for floor in floors:
        for prefix in floor.prefixes:
            package = prefix.endswith("/")
            name = prefix.rstrip("/")
            if module == name or (package and module.startswith(name + ".")):
                if len(name) > best_len:
                    best, best_len = floor, len(name)
    return best


def imports_of(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import of the package in ``path``, wherever it sits."""
    modules = {module_name(root, p) for p in root.rglob("*.py")}
    me = module_name(root, path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # `from negtrain.core import labels` imports the module negtrain.core.labels.
                target = f"{source}.{alias.name}"
                found.append((node.lineno, target if target in modules else source))
    return [(line, m) for line, m in found if m == root.name or m.startswith(root.name + ".")]


def check(root: Path, floors: list[Floor]) -> list[str]:
    """Every breach of the floor rule in the package at ``root``, one line each."""
    problems = []
    graph: dict[str, set[str]] = {}
    files = sorted(root.rglob("*.py"))
    for path in files:
        me = module_name(root, path)
        mine = floor_of(me, floors)
        where = path.relative_to(root.parent)
        if mine is None:
            problems.append(f"{where}: {me} is on no floor of ARCHITECTURE.md")
            continue
        graph[me] = set()
        for line, target in imports_of(root, path):
            graph[me].add(target)
            theirs = floor_of(target, floors)
            if theirs is not None and theirs.number > mine.number:
                problems.append(
                    f"{where}:{line}: {me} (floor {mine.number}, {mine.name}) imports {target} "
                    f"(floor {theirs.number}, {theirs.name})"
                )
    problems += [f"import cycle among: {', '.join(group)}" for group in cycles(graph)]
    return list(dict.fromkeys(problems))  # one line per breach, however many names it imports


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a loop (strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


FLOORS = read_floors(REPO / "ARCHITECTURE.md")


def test_the_floor_table_is_read():
    assert [f.number for f in FLOORS] == list(range(8, 0, -1))
    assert floor_of("negtrain.io.atomic", FLOORS).name == "base"
    assert floor_of("negtrain.models.contract", FLOORS).name == "objectives and models"
    assert floor_of("negtrain.cli", FLOORS).name == "commands"
    assert floor_of("negtrain.client", FLOORS) is None  # a module entry is not a prefix


def test_negtrain_imports_only_downwards_and_has_no_cycles():
    problems = check(REPO / "negtrain", FLOORS)
    assert not problems, "\n".join(problems)


def test_the_check_catches_each_kind_of_breach():
    root = FIXTURES / "layers" / "negtrain"
    assert check(root, FLOORS) == [
        # floor 1 importing floor 6 inside a function
        "negtrain/core/errors.py:5: negtrain.core.errors (floor 1, base) imports negtrain.training.run (floor 6, training)",
        # floor 5 importing floor 6 with a relative import
        "negtrain/models/nli.py:3: negtrain.models.nli (floor 5, objectives and models) imports negtrain.training.build (floor 6, training)",
        "negtrain/stray.py: negtrain.stray is on no floor of ARCHITECTURE.md",
        "import cycle among: negtrain.training.resume, negtrain.training.run",
    ]


# ---- a served model's path never reaches the training floor ---------------------------------

#: What scores a served model: it needs no Trainer, so it imports nothing of training (nor, through
#: it, Lightning; tests/test_served_imports.py checks the whole card in a process of its own).
SERVED_PATH = ("negtrain.serving", "negtrain.evaluation.served")


def imports_from(root: Path, importers: tuple[str, ...], forbidden: str) -> list[str]:
    """Each import of ``forbidden`` (a package) by a module under ``importers``, wherever it sits."""
    found = []
    for path in sorted(root.rglob("*.py")):
        me = module_name(root, path)
        if not any(me == m or me.startswith(m + ".") for m in importers):
            continue
        found += [f"{path.relative_to(root.parent)}:{line}: {me} imports {target}"
                  for line, target in imports_of(root, path) if target == forbidden or target.startswith(forbidden + ".")]
    return found


def test_the_served_path_imports_nothing_from_training():
    assert imports_from(REPO / "negtrain", SERVED_PATH, "negtrain.training") == []


def test_the_served_path_check_catches_an_import_inside_a_function(tmp_path):
    serving = tmp_path / "negtrain" / "serving"
    serving.mkdir(parents=True)
    for d in (tmp_path / "negtrain", serving):
        (d / "__init__.py").write_text("")
    (tmp_path / "negtrain" / "training.py").write_text("")
    (serving / "x.py").write_text("def f():\n    from negtrain.training import run\n")
    assert imports_from(tmp_path / "negtrain", SERVED_PATH, "negtrain.training") == [
        "negtrain/serving/x.py:2: negtrain.serving.x imports negtrain.training"]


# ---- a model family is asked, never named --------------------------------------------------

#: Where a family's name may be compared: its settings section (the declaration) and the table.
FAMILY_HOMES = {"negtrain/config/model.py", "negtrain/models/families.py"}


def family_name_comparisons(source: str, names: set[str]) -> list[int]:
    """Lines where a family is compared with a family's name as a string (``family == "nli"``,
    ``recipe.model.family in ("seq2seq", "causal_lm")``, ...): code that should ask the family
    instead. Only comparisons whose other side speaks of a family count (a loss named "mlm" is
    not a family)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for side in sides:
            items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            named = any(isinstance(i, ast.Constant) and i.value in names for i in items)
            others = [ast.unparse(s) for s in sides if s is not side]
            if named and any("family" in o for o in others):
                lines.append(node.lineno)
                break
    return lines


def test_no_code_outside_the_family_table_compares_a_family_name():
    from negtrain.config import families

    found = []
    for path in sorted((REPO / "negtrain").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel not in FAMILY_HOMES:
            found += [f"{rel}:{line}" for line in family_name_comparisons(path.read_text(encoding="utf-8"), set(families()))]
    assert not found, "compare a family's declaration (negtrain/config/model.py), not its name: " + ", ".join(found)


def test_the_family_check_catches_each_form():
    source = (
        "a = family == 'nli'\n"
        "b = 'mlm' != recipe.model.family\n"
        "c = family in ('seq2seq', 'causal_lm')\n"
        "d = family not in ['causal_lm']\n"
        "e = family == 'bert'\n"  # not a family
        "f = {'nli': 1}['nli']\n"  # a table keyed by family: no comparison
        "g = section.get('family', 'nli') != 'nli'\n"
        "h = loss == 'mlm'\n"  # not about a family
    )
    assert family_name_comparisons(source, {"nli", "seq2seq", "causal_lm", "mlm"}) == [1, 2, 3, 4, 7]


# ---- evaluation and serving never reach the training floor -------------------------------------------

#: Evaluating a model (negtrain/evaluation/) and serving one (negtrain/serving/) need no Trainer.
NO_TRAINING = ("negtrain.evaluation", "negtrain.serving")

def test_evaluation_and_serving_import_nothing_from_training():
    """Every import, at the top of a module or inside a function: the hf card's in-process scoring
    is the training floor's, handed to the card by the evaluate command (commands/ is above both)."""
    found = sorted(imports_from(REPO / "negtrain", NO_TRAINING, "negtrain.training"))
    assert found == [], "evaluation and serving import nothing from training"


#: A module a reader can hold in mind: past this, split it by what its parts do (ARCHITECTURE.md).
MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in sorted((REPO / "negtrain").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"split these by purpose: {long}"
