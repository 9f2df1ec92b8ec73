"""The response cache writes answers in batched transactions, and a process killed outright
leaves a readable cache holding every committed answer, which a rerun continues from."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from negtrain.serving.cache import ResponseCache
from negtrain.engine.requests import Answer

ROOT = Path(__file__).resolve().parent.parent


def _committed(path: Path) -> int:
    """Rows another connection sees: only what was committed."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]


def test_answers_are_committed_a_batch_at_a_time(tmp_path):
    cache = ResponseCache(tmp_path, batch_rows=10, batch_seconds=3600)
    file = tmp_path / "responses.sqlite"
    for i in range(9):
        cache.put(f"k{i}", Answer(text=f"answer {i}"))
    assert _committed(file) == 0 and cache.commits == 0  # the batch is open
    assert cache.get("k3") == Answer(text="answer 3")  # answered from the open batch
    cache.put("k9", Answer(text="answer 9"))
    assert _committed(file) == 10 and cache.commits == 1  # ten answers, one transaction
    for i in range(10, 25):
        cache.put(f"k{i}", Answer(logprob=-float(i), n_tokens=1, is_greedy=False))
    assert _committed(file) == 20 and cache.commits == 2
    cache.close()
    assert _committed(file) == 25 and cache.commits == 3  # close commits the last, partial batch
    cache.close()  # a second close does nothing
    reopened = ResponseCache(file)
    assert reopened.get("k24") == Answer(logprob=-24.0, n_tokens=1, is_greedy=False)
    assert reopened.get("k0") == Answer(text="answer 0")
    reopened.close()


def test_a_batch_open_too_long_is_committed_with_the_next_answer(tmp_path):
    cache = ResponseCache(tmp_path, batch_rows=1000, batch_seconds=0.0)
    cache.put("a", Answer(text="x"))
    cache.put("b", Answer(text="y"))
    assert _committed(tmp_path / "responses.sqlite") == 2 and cache.commits == 2
    cache.close()


def test_a_rewritten_answer_is_the_last_one_put(tmp_path):
    cache = ResponseCache(tmp_path, batch_rows=3, batch_seconds=3600)
    cache.put("a", Answer(text="old"))
    cache.put("a", Answer(text="new"))  # the same key twice in one batch: one row
    assert cache.get("a") == Answer(text="new")
    cache.close()
    assert _committed(tmp_path / "responses.sqlite") == 1
    assert ResponseCache(tmp_path).get("a") == Answer(text="new")


KILLED = """
import os, signal, sys
from negtrain.serving.cache import ResponseCache
from negtrain.engine.requests import Answer
cache = ResponseCache(sys.argv[1], batch_rows=10, batch_seconds=3600)
for i in range(25):
    cache.put(f"k{i}", Answer(text=f"answer {i}"))
os.kill(os.getpid(), signal.SIGKILL)  # no close, no exit handlers: as a kill -9 or a lost machine
"""

LEFT_OPEN = """
import sys
from negtrain.serving.cache import ResponseCache
from negtrain.engine.requests import Answer
cache = ResponseCache(sys.argv[1], batch_rows=10, batch_seconds=3600)
for i in range(3):
    cache.put(f"k{i}", Answer(text=f"answer {i}"))
raise SystemExit(3)  # an error that ends the process without closing the cache
"""


def _run(code: str, path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=120)


def test_a_killed_process_leaves_its_committed_answers_and_a_rerun_continues(tmp_path):
    done = _run(KILLED, tmp_path)
    assert done.returncode == -9, done.stderr
    file = tmp_path / "responses.sqlite"
    assert _committed(file) == 20  # two whole batches; the open one (5 answers) is lost
    cache = ResponseCache(tmp_path, batch_rows=10, batch_seconds=3600)
    assert [cache.get(f"k{i}") is not None for i in range(25)] == [True] * 20 + [False] * 5
    assert cache.get("k19") == Answer(text="answer 19")
    for i in range(20, 25):  # the rerun asks again only what was lost
        cache.put(f"k{i}", Answer(text=f"answer {i}"))
    cache.close()
    assert _committed(file) == 25


def test_a_cache_left_open_is_committed_when_the_process_exits(tmp_path):
    done = _run(LEFT_OPEN, tmp_path)
    assert done.returncode == 3, done.stderr
    assert _committed(tmp_path / "responses.sqlite") == 3
