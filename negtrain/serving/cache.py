"""Answers of a model on disk, so a rerun (or a run resumed after a kill) sends no request that
was already answered.

One SQLite file (``responses.sqlite``): a row per answered request, keyed by
:func:`negtrain.serving.requests.cache_key`, committed one at a time. SQLite's journal makes
each commit atomic, so a kill leaves either the whole answer or none of it, never half an entry
read back as an answer; several processes may share one file (``--cache PATH``), SQLite locks it.
Only answers are stored: no request headers, so no API key ever reaches the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

from negtrain.core.errors import ConfigError
from negtrain.serving.requests import Answer

FILE_NAME = "responses.sqlite"


class ResponseCache:
    def __init__(self, path: Path) -> None:
        """``path``: the SQLite file, or a folder to hold ``responses.sqlite``."""
        path = Path(path)
        if path.is_dir() or path.suffix == "":
            path = path / FILE_NAME
        self.path = path
        try:
            self._db = self._connect(path)
        except sqlite3.DatabaseError as exc:  # a damaged file (cut short, overwritten): set aside, begin anew
            aside = self._set_aside(path)
            print(f"response cache {path}: damaged ({exc}); set aside as {aside.name}, and every request is asked "
                  "of the server again", flush=True)
            try:
                self._db = self._connect(path)
            except (OSError, sqlite3.Error) as again:
                raise ConfigError(f"--cache {path}: cannot open the response cache ({again})") from again
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"--cache {path}: cannot open the response cache ({exc})") from exc
        self._lock = threading.Lock()
        self._said_unreadable = False

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        """The cache's connection, its file checked (``quick_check``): a file that is not a whole
        SQLite database raises ``sqlite3.DatabaseError`` here, not mid-card."""
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=60, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)")
            found = db.execute("PRAGMA quick_check").fetchone()
            if found is None or found[0] != "ok":
                said = " ".join(str(found[0]).split("\n")[:2]) if found else "no answer"
                raise sqlite3.DatabaseError(f"its check found: {said}")
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _set_aside(path: Path) -> Path:
        """Rename a damaged cache (and its journal files) beside it, never deleting it."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = path.with_name(f"{path.name}.damaged-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        for suffix in ("-wal", "-shm"):
            journal = path.with_name(path.name + suffix)
            if journal.exists():
                os.replace(journal, aside.with_name(aside.name + suffix))
        os.replace(path, aside)
        return aside

    def get(self, key: str) -> Answer | None:
        """The cached answer, or None: not cached, or a row that cannot be read (damaged by hand
        or by another tool), which is asked again and overwritten; said once per cache."""
        with self._lock:
            row = self._db.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            data = json.loads(row[0])
            if not isinstance(data, dict):
                raise ValueError("not an answer object")
            return Answer.of(data)
        except (ValueError, TypeError):
            if not self._said_unreadable:
                self._said_unreadable = True
                print(f"response cache {self.path}: a row cannot be read (not an answer); its request is asked again", flush=True)
            return None

    def put(self, key: str, answer: Answer) -> None:
        with self._lock:
            # Autocommit: one statement, one atomic transaction.
            self._db.execute("INSERT OR REPLACE INTO answers (key, answer) VALUES (?, ?)", (key, json.dumps(answer.as_json())))

    def close(self) -> None:
        with self._lock:
            self._db.close()
