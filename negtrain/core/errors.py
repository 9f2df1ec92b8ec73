"""User-facing errors.

Everything a user can get wrong (a recipe key, a data row, a missing file, a prediction label)
raises :class:`NegtrainError`. The CLI turns it into one ``error: ...`` line and exit code 2;
anything else is a bug and keeps its traceback, except :class:`Stopped`, a command stopped by a
signal (exit code 128 + the signal number).
"""

from __future__ import annotations

import difflib
import re
import signal
from collections.abc import Iterable


class NegtrainError(Exception):
    """An error caused by the user's input, reported without a traceback."""


class DataError(NegtrainError):
    """A data file is missing or malformed."""


class ConfigError(NegtrainError):
    """A recipe or override is invalid."""


class Stopped(BaseException):
    """A command stopped by a signal (SIGTERM, SIGINT): not a success, and not an input error.

    A ``BaseException`` like ``KeyboardInterrupt``, so that no ``except Exception`` on the way
    (a sweep's per-trial handler, a library's) mistakes it for one trial's failure and goes on.
    The CLI prints :attr:`message` (unless the code that stopped already did, ``printed``) and
    exits with :attr:`exit_code`; code that can say how to continue catches it, writes its state
    and raises it again with the command that continues (:meth:`continue_with`).
    """

    def __init__(self, signum: int, message: str = "", printed: bool = False) -> None:
        self.signum = signum
        self.message = message or f"stopped by {self.signal_name}"
        self.printed = printed
        super().__init__(self.message)

    @property
    def exit_code(self) -> int:
        # The shell's convention for "ended by signal N": never 0, so a scheduler sees no success.
        return 128 + self.signum

    @property
    def signal_name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    def continue_with(self, what: str, command: str) -> Stopped:
        """A new stop of the same signal whose message says how to continue ``what``."""
        return Stopped(self.signum, f"stopped by {self.signal_name}: {what}; continue with: {command}")


class Preempted(Stopped):
    """``fit`` stopped on a signal (SIGTERM, SIGUSR1, SIGINT) after writing a checkpoint to resume from.

    Its message (with the resume command) is printed where it is raised, on rank 0.
    """

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(signum, message, printed=True)


def _words(name: str) -> list[str]:
    """A name's words, whatever joins them: ``ScoNe-NLI`` and ``scone_nli`` are ``[scone, nli]``."""
    return [w for w in re.split(r"[-_\s./:]+", str(name).lower()) if w]


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` most likely meant: the same words however spelt and joined; else the
    choice made of the most of its words (``scone-nli`` is ``scone``, not ``scone_nlg``); else the
    closest spelling."""
    choices = list(choices)
    key = _words(word)
    same = [c for c in choices if _words(c) == key]
    if same:
        return same[0]
    within = [c for c in choices if _words(c) and set(_words(c)) <= set(key)]
    if within:
        return max(within, key=lambda c: len(_words(c)))
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or ``""`` if none is close."""
    close = closest(word, choices)
    return f" (did you mean '{close}'?)" if close is not None else ""


def unknown_name(kind: str, word: str, choices: Iterable[str]) -> NegtrainError:
    choices = sorted(choices)
    return ConfigError(
        f"unknown {kind} '{word}'{did_you_mean(word, choices)}; known: {', '.join(choices)}"
    )
