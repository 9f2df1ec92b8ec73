"""Handing memory the process has freed back to the operating system.

glibc's allocator keeps freed memory of its main heap for reuse, and can return only the top of
the heap to the system by itself. A run frees a lot at a few moments (the setup's reading and
tokenizing, an evaluation's activations, a checkpoint's serialisation), and what it freed below
memory still in use stayed resident, counted in the run's memory until the process ended.
``malloc_trim(0)`` returns every free page of the heap. It costs a few milliseconds, so it is
called at those moments only. Elsewhere (no glibc) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Literal

#: glibc, once loaded; False: this C library cannot trim (tried once); None: not tried yet.
_libc: ctypes.CDLL | Literal[False] | None = None


def release_freed_memory() -> bool:
    """Return the pages the allocator holds free to the system; whether it could."""
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
            _libc = False
    if not _libc:
        return False
    _libc.malloc_trim(0)
    return True
