"""Reading recipe YAML: duplicate keys, deep nesting and alias bombs refused, errors with file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from negtrain.core.errors import ConfigError
from negtrain.core.paths import check_not_special


#: Limits on a YAML document's shape. A recipe is a few levels deep and a few hundred values;
#: past these, a document is a mistake or an attack: 20,000 nested ``[`` overflow the parser's
#: recursion, and nine aliases of nine aliases ("billion laughs") expand to 10^9 values that any
#: walk over the recipe (validation, saving, logging) takes forever to visit.
MAX_YAML_DEPTH = 100
MAX_YAML_VALUES = 100_000


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses duplicate mapping keys (plain YAML keeps the last one silently, so a
    recipe with ``learning_rate`` twice would train with whichever came second), documents nested
    deeper than :data:`MAX_YAML_DEPTH` and documents whose aliases expand to more than
    :data:`MAX_YAML_VALUES` values."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict, set)):  # `? [a, b]`: YAML allows it, no setting is named so
                raise yaml.constructor.ConstructorError(
                    None, None, f"a {type(key).__name__} as a key; keys are names", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (first at line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand to more than MAX_YAML_VALUES values, or that
    contains itself (``&a [*a]``).

    A node reached through several aliases is one object in memory but is visited once per path
    by everything that walks the recipe, so what counts is the expanded size. Sizes are memoised
    per node and computed bottom-up without recursion (the depth may be up to MAX_YAML_DEPTH)."""
    size: dict[int, int] = {}
    open_: set[int] = set()  # nodes whose children are being sized: meeting one again is a cycle
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack[-1]
        if id(node) in size:
            stack.pop()
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            size[id(node)] = 1
            stack.pop()
            continue
        pending = [c for c in children if id(c) not in size]
        if pending and id(node) not in open_:
            open_.add(id(node))
            for child in pending:
                if id(child) in open_:
                    raise yaml.composer.ComposerError(
                        None, None, "an alias refers to a collection that contains it (a cycle)", child.start_mark
                    )
            stack.extend(pending)
            continue
        if pending:  # a child still unsized after its turn: it is an ancestor, reached again
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a collection that contains it (a cycle)", node.start_mark
            )
        open_.discard(id(node))
        stack.pop()
        size[id(node)] = 1 + sum(size[id(c)] for c in children)
        if size[id(node)] > MAX_YAML_VALUES:
            raise yaml.composer.ComposerError(
                None, None, f"expands to more than {MAX_YAML_VALUES:,} values through aliases (&anchor / *alias)",
                node.start_mark,
            )


def parse_yaml(text: str) -> Any:
    """YAML text as data, with :class:`_StrictLoader`'s limits (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)


def load_yaml(path: Path) -> Any:
    check_not_special(path, "recipe")  # a FIFO would block the read forever
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"recipe file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the recipe ({exc.strerror or exc})") from exc
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
