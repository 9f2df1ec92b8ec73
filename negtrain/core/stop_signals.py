"""SIGTERM and SIGINT never end a command as a success.

Without this, SIGTERM kills Python by the signal (no message, no state written) and Lightning
turns it, or Ctrl+C, into exit code 0 or 1 in the middle of a ``validate``. :func:`stop_on_signals` (around
every command the CLI runs) makes both signals raise :class:`negtrain.core.errors.Stopped` in
the main thread, wherever the command is; the code that knows how to continue (a ``fit``, a
sweep, a seed group) catches it, leaves its state readable and says how to continue; the CLI
exits with 128 + the signal number (143 for SIGTERM, 130 for SIGINT).

During training, :class:`negtrain.training.preemption.MidEpochCheckpoint` takes the signals over
to stop at the next optimizer step with a checkpoint instead.

Processes forked by the command (dataloader workers, tokenizing processes) get the handlers from
before back at the fork (:func:`os.register_at_fork`): a SIGTERM from a pool's ``terminate()`` must
kill a worker at once, also one blocked in a lock, where a Python-level handler would never run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Union

from negtrain.core.errors import Stopped

#: The signals turned into :class:`Stopped`.
SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: What :func:`signal.getsignal` gives and :func:`signal.signal` takes: a Python handler,
#: SIG_DFL or SIG_IGN, or None (a handler not installed from Python).
Handler = Union[Callable[[int, FrameType | None], Any], int, signal.Handlers, None]

_installed_by: int | None = None
#: The handlers :func:`stop_on_signals` replaced (what a forked child gets back).
_before: dict[int, Handler] = {}


def _raise_stopped(signum: int, frame) -> None:
    if os.getpid() != _installed_by:
        # A forked child that inherited this handler inside another one (Lightning's): as without it.
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Stopped(signum)


def _restore_in_child() -> None:
    for signum, handler in _before.items():
        if signal.getsignal(signum) is _raise_stopped:
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_restore_in_child)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT raise :class:`Stopped` in this (main) thread; the
    handlers before it are put back afterwards (so a program calling the CLI keeps its own)."""
    global _installed_by
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in SIGNALS}
    _before.update({signum: h for signum, h in before.items() if h is not _raise_stopped})
    _installed_by = os.getpid()
    for signum in SIGNALS:
        signal.signal(signum, _raise_stopped)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
