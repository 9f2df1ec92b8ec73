"""``python -m negtrain``: the command table.

Malformed input exits with code 2 and one ``error: ...`` line; ``--debug`` shows the traceback.
SIGTERM and SIGINT end every command with 128 + the signal number (143, 130), never 0
(:mod:`negtrain.core.stop_signals`).
Arguments a subcommand does not declare are passed to it as ``extra`` (recipe overrides such as
``--trainer.max_epochs=1``); subcommands that take none reject them.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import select
import sys
from collections.abc import Callable
from dataclasses import dataclass

from negtrain.benchmarks.files import pin_data_dirs
from negtrain.commands import compare, env, evaluate, export, gguf_export, recipes, report, sweep, tiny_model, train, view
from negtrain.core.errors import NegtrainError, Stopped
from negtrain.core.paths import check_input_path
from negtrain.core.secrets import redact_text
from negtrain.core.stop_signals import stop_on_signals


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, list[str]], int]
    #: The arguments naming a path the command reads (its ``dest``, and the name an error shows):
    #: each is checked to exist before the command imports anything heavy.
    inputs: tuple[tuple[str, str], ...] = ()


COMMANDS: dict[str, Command] = {
    "fit": Command("train a recipe, evaluating its benchmarks every epoch", train.add_fit_arguments, train.run_fit,
                   (("resume", "--resume"),)),
    "validate": Command("score a checkpoint (or the starting model) on the recipe's eval benchmarks", train.add_eval_arguments, train.run_eval,
                        (("checkpoint", "--checkpoint"),)),
    "test": Command("score a checkpoint on the recipe's test benchmarks (data.test, else data.eval)", train.add_eval_arguments, train.run_eval,
                        (("checkpoint", "--checkpoint"),)),
    "evaluate": Command("score a model on the benchmarks, as a report card (--model), a paper's protocol (--protocol), or a predictions file from any system (--predictions); --list: the benchmarks", evaluate.add_arguments, evaluate.run,
                        (("predictions", "--predictions"),)),
    "compare": Command("paired bootstrap comparison of two runs, report cards or predictions files (B - A per metric)", compare.add_arguments, compare.run,
                       (("a", "A"), ("b", "B"))),
    "recipes": Command("list the recipes with their purpose", recipes.add_arguments, recipes.run),
    "export": Command("write a run's checkpoint as a from_pretrained folder with a model card", export.add_export_arguments, export.run_export,
                      (("run", "--run"),)),
    "push": Command("export a run and upload it to the Hugging Face Hub", export.add_push_arguments, export.run_push,
                    (("run", "--run"),)),
    "report": Command("plot a run's metrics per epoch and summarise it in Markdown (a second --run overlays)", report.add_arguments, report.run,
                      (("run", "--run"),)),
    "env": Command("print this machine's provenance (versions, git commit, CPU/GPU), or --constraints RUN: a run's versions for pip", env.add_arguments, env.run,
                   (("constraints", "--constraints"),)),
    "view": Command("write a static results browser of runs, report cards or protocol outputs: contrast sets, filters, A vs B", view.add_arguments, view.run,
                    (("paths", "PATH"),)),
    "sweep": Command("write a recipe's W&B sweep configuration (and create the sweep when online), or run N trials here with --local N", sweep.add_arguments, sweep.run),
    "gguf-export": Command("write a GGUF file (llama.cpp's format) as a dequantized from_pretrained folder with its tokenizer", gguf_export.add_arguments, gguf_export.run),
    "tiny-model": Command("save a tiny random-weight causal LM (or seq2seq) with a real tokenizer, offline, to try the LLM features on", tiny_model.add_arguments, tiny_model.run),
}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is a NegtrainError: one ``error: ...`` line, exit code 2."""

    def error(self, message: str):
        raise NegtrainError(f"{self.prog}: {message} (see {self.prog} --help)")


def parser() -> argparse.ArgumentParser:
    top = _Parser(
        prog="negtrain",
        description="Train and evaluate negation-robust language models.",
        epilog="Any recipe field can be overridden as --section.key=value, e.g. --trainer.max_epochs=1.",
    )
    top.add_argument("--debug", action="store_true", help="show tracebacks for input errors")
    sub = top.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        # No abbreviations: parse_known_args would otherwise read a recipe override such as --seed=3
        # as fit's --seeds, and --out... as --output-dir.
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help, allow_abbrev=False))
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. Output that cannot be written ends the command in one line
    (a full disk) or quietly (a reader that went away: ``| head -1``), never a traceback."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at the interpreter's exit, where an error is a traceback
        return code
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # another pipe or socket (a server that hung up): not the reader of the output
        _stdout_to_devnull()
        return 128 + 13  # as a Unix tool killed by SIGPIPE: quietly, and never read as a success
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        _stdout_to_devnull()
        print(f"error: cannot write {exc.filename or 'the output'}: {exc.strerror} (a full disk or device)", file=sys.stderr)
        return 1


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (poll says so: POLLERR)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def _stdout_to_devnull() -> None:
    """Point standard output at the null device, so what is left in its buffer is not written
    again (and fails again) when the interpreter exits."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # an output without a file descriptor (a test's capture): nothing is flushed at exit


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    pin_data_dirs()
    try:
        with stop_on_signals():
            args, extra = parser().parse_known_args(argv)
            args.argv = argv  # the exact invocation, recorded with a run (command.txt)
            command = COMMANDS[args.command]
            check_inputs(args, command.inputs)
            return command.run(args, extra)
    except NegtrainError as exc:
        if debug:
            raise
        # An error may quote what the user gave (a URL with a key in its query): masked as every file is.
        print(f"error: {one_line(redact_text(str(exc)))}", file=sys.stderr)
        return 2
    except Stopped as stopped:
        # Never a success: a scheduler or a script must not take a stopped command for a finished one.
        if not stopped.printed:
            print(stopped.message, file=sys.stderr, flush=True)
        return stopped.exit_code
    except KeyboardInterrupt:  # a SIGINT that reached Python's own handler
        print("stopped by SIGINT", file=sys.stderr, flush=True)
        return 130


def check_inputs(args: argparse.Namespace, inputs: tuple[tuple[str, str], ...]) -> None:
    """Every path the command reads exists: a missing one is answered in a fraction of a second,
    before the command imports torch (``compare``, ``view``, ``report``, ``fit --resume``, ...)."""
    for dest, shown in inputs:
        value = getattr(args, dest, None)
        for path in value if isinstance(value, list) else [value]:
            if path is not None:
                check_input_path(path, shown)


#: The longest error line printed. Messages name a few examples and count the rest; this bounds
#: one that quotes a huge user value (a megabyte-long id or field) all the same.
MAX_ERROR_CHARS = 2000


def one_line(message: str) -> str:
    """``message`` with line breaks and other control characters escaped as in a Python literal
    (``\\n``, ``\\x1b``): an error may quote user text (a recipe name, a label, a data field), and
    must stay one line that a terminal prints as it is, of at most :data:`MAX_ERROR_CHARS`."""
    line = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in message)
    if len(line) > MAX_ERROR_CHARS:
        head, tail = MAX_ERROR_CHARS - 500, 150
        line = line[:head] + f" ... [{len(line) - head - tail} characters left out] ... " + line[-tail:]
    return line
