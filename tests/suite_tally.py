"""A time limit (a `timeout`, CI's job limit) stops the suite with SIGTERM, and pytest then dies
without its closing tally: nobody can tell how far it got. Turned into the Ctrl-C that pytest
already handles, it prints the tests passed and failed so far. tests/conftest.py installs it.

Only in pytest's own process: a process forked from it (a multiprocessing pool's worker, which its
pool ends with SIGTERM) inherits the handler and must die of SIGTERM as it would without it; raised
there, the interruption left a worker hung on its pool's lock."""

from __future__ import annotations

import os
import signal
import threading

_SUITE_PID: int | None = None


def pytest_configure(config) -> None:
    global _SUITE_PID
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        _SUITE_PID = os.getpid()
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
        # A forked child gets SIGTERM's default back at once, before it runs anything: a Python
        # handler in a pool worker blocked on its pool's lock never ran, and the worker hung.
        os.register_at_fork(after_in_child=_default_sigterm)


def _default_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt_on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    if os.getpid() != _SUITE_PID:  # a forked child: end as SIGTERM ends it by default
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise KeyboardInterrupt("SIGTERM: the run was stopped from outside (a time limit?)")
