"""Tokenizing a split on several cores, chunk by chunk, in order.

``encode_in_parallel(chunks, encode, num_proc)`` maps ``encode`` over an iterable of chunks (lists
of texts or examples) in a pool of forked worker processes and yields the results in input order.

- Fork, not spawn: a worker inherits ``encode`` (usually a closure over a tokenizer) from the
  parent, so neither the function nor the tokenizer is pickled; only the chunks go out, and
  ``encode`` must return numpy arrays (cheap to pickle back, unlike Python lists of ids, and
  unlike torch tensors, which torch's pickler would move to shared-memory files).
- A bounded window: at most ``2 * num_proc`` chunks are in flight, so a large input read as a
  stream is never materialised (``multiprocessing.Pool.imap`` would read the whole iterable ahead).
- The fast tokenizers' own thread pool is turned off in the workers (``TOKENIZERS_PARALLELISM``):
  the processes already fill the cores, and the Rust pool would otherwise warn, or deadlock,
  after a fork.
- One process (``num_proc`` 1), a single chunk, a platform without fork, or a caller that is
  itself a daemonic process (a dataloader worker may not have children) encodes in-process:
  the results are the same, only slower.

``default_num_proc(setting)`` is the recipe's ``data.num_proc`` if set, else the cores this
process may run on.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: The encode function of the pool being started. Set in the parent just before the fork, so the
#: workers inherit it instead of receiving a pickle of it (a closure over a tokenizer).
_ENCODE: Callable[[Any], Any] | None = None


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a job scheduler may restrict)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_num_proc(setting: int | None = None) -> int:
    """Tokenizing processes: the recipe's ``data.num_proc`` when given, else every available core."""
    return max(1, setting) if setting else available_cores()


def _worker_start() -> None:
    try:
        import torch

        torch.set_num_threads(1)  # one process per core; an encoder using torch must not oversubscribe
    except ImportError:  # torch is a dependency; a stripped environment still tokenizes
        pass


def _run(chunk):
    assert _ENCODE is not None, "a tokenizing worker started without its encode function"
    return _ENCODE(chunk)


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def encode_in_parallel(chunks: Iterable, encode: Callable[[Any], Any], num_proc: int | None = None) -> Iterator:
    """``encode(chunk)`` for every chunk, in order, on ``num_proc`` processes (default: all cores)."""
    global _ENCODE
    num_proc = default_num_proc(num_proc)
    chunks = iter(chunks)
    head = list(itertools.islice(chunks, 2))
    if num_proc <= 1 or len(head) < 2 or not _can_fork():
        # Not worth a pool (or not allowed one): the same results in this process.
        yield from map(encode, itertools.chain(head, chunks))
        return
    chunks = itertools.chain(head, chunks)
    _ENCODE = encode
    # Set across the fork itself: the fast tokenizers check it in the child at fork time, and
    # warn (once per worker) if the parent had used its thread pool and it is unset.
    saved = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        pool = multiprocessing.get_context("fork").Pool(num_proc, initializer=_worker_start)
    finally:
        if saved is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = saved
    try:
        window: deque = deque()
        for chunk in chunks:
            window.append(pool.apply_async(_run, (chunk,)))
            if len(window) >= 2 * num_proc:
                yield window.popleft().get()
        while window:
            yield window.popleft().get()
    finally:
        _ENCODE = None
        pool.terminate()  # also when the consumer stops early or an encode raised
        pool.join()
