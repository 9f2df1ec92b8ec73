"""A time limit (a `timeout`, CI's job limit) stops the suite with SIGTERM, and pytest then dies
without its closing tally: nobody can tell how far it got. Turned into the Ctrl-C that pytest
already handles, it prints the tests passed and failed so far. tests/conftest.py installs it."""

from __future__ import annotations

import signal
import threading


def pytest_configure(config) -> None:
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt_on_sigterm)


def _interrupt_on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    raise KeyboardInterrupt("SIGTERM: the run was stopped from outside (a time limit?)")
