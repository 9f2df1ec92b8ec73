"""User-facing errors.

Everything a user can get wrong (a recipe key, a data row, a missing file, a prediction label)
raises :class:`NegtrainError`. The CLI turns it into one ``error: ...`` line and exit code 2;
anything else is a bug and keeps its traceback, except :class:`Preempted`, a ``fit`` stopped on
purpose by a signal.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class NegtrainError(Exception):
    """An error caused by the user's input, reported without a traceback."""


class DataError(NegtrainError):
    """A data file is missing or malformed."""


class ConfigError(NegtrainError):
    """A recipe or override is invalid."""


class Preempted(Exception):
    """``fit`` stopped on a signal (SIGTERM, SIGUSR1) after writing a checkpoint to resume from.

    Not a :class:`NegtrainError`: nothing was wrong with the input. ``fit`` exits with
    :attr:`exit_code` (see :mod:`negtrain.training.preemption`).
    """

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        # The shell's convention for "ended by signal N": never 0, so a scheduler sees no success.
        return 128 + self.signum


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or ``""`` if none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""


def unknown_name(kind: str, word: str, choices: Iterable[str]) -> NegtrainError:
    choices = sorted(choices)
    return ConfigError(
        f"unknown {kind} '{word}'{did_you_mean(word, choices)}; known: {', '.join(choices)}"
    )
