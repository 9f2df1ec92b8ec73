"""Answers of a model on disk, so a rerun (or a run resumed after a kill) sends no request that
was already answered.

One SQLite file (``responses.sqlite``): a row per answered request, keyed by
:func:`negtrain.engine.requests.cache_key`. Answers are written in batches, one transaction per
:data:`BATCH_ROWS` answers or per :data:`BATCH_SECONDS` since the batch's first answer, whichever
comes first, and at ``close`` (and at the process's exit, for a cache left open); a transaction a
row cost one disk sync per answer, most of a small card's fixed cost. SQLite's journal makes each
transaction atomic, so a kill leaves whole answers or none, never half an entry read back as an
answer: a process killed outright loses at most the answers of its open batch, which a rerun asks
again, and keeps every committed one. An answer not yet committed is answered from memory by
``get``. Several processes may share one file (``--cache PATH``), SQLite locks it. Only answers
are stored: no request headers, so no API key ever reaches the file.
"""

from __future__ import annotations

import atexit
import json
import os
import sqlite3
import threading
import time
import urllib.parse
from pathlib import Path

from negtrain.core.errors import ConfigError
from negtrain.engine.requests import Answer

FILE_NAME = "responses.sqlite"
#: Answers per transaction.
BATCH_ROWS = 64
#: Seconds an answer waits in an open batch at most (checked when the next one is put): a slow
#: server's answers are not held back for long.
BATCH_SECONDS = 2.0


def _not_writable(path: Path) -> str | None:
    """Why this process cannot write the cache at ``path`` (SQLite writes the file and, beside it,
    its journal files), or None."""
    if path.exists():
        if not os.access(path, os.W_OK):
            return "the file is read-only"
        return None if os.access(path.parent, os.W_OK | os.X_OK) else "its folder is read-only"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return None if os.access(folder, os.W_OK | os.X_OK) else f"{folder} is read-only"


class ResponseCache:
    def __init__(self, path: Path, batch_rows: int = BATCH_ROWS, batch_seconds: float = BATCH_SECONDS) -> None:
        """``path``: the SQLite file, or a folder to hold ``responses.sqlite``; ``batch_rows``
        and ``batch_seconds``: when a batch of answers is committed (see the module)."""
        path = Path(path)
        if path.is_dir() or path.suffix == "":
            path = path / FILE_NAME
        self.path = path
        #: A cache this process cannot write (a read-only file or folder): its answers are read,
        #: new ones are kept in memory for this run only.
        self.read_only = False
        try:
            self._db = self._open(path)
        except sqlite3.DatabaseError as exc:  # a damaged file (cut short, overwritten): set aside, begin anew
            if self.read_only:
                raise ConfigError(f"--cache {path}: damaged ({exc}) and read-only, so it cannot be set aside; "
                                  "give another --cache") from exc
            try:
                aside = self._set_aside(path)
            except OSError as cannot:
                raise ConfigError(f"--cache {path}: damaged ({exc}), and it cannot be set aside "
                                  f"({cannot.strerror or cannot}); give another --cache") from exc
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
        self.batch_rows, self.batch_seconds = max(1, int(batch_rows)), float(batch_seconds)
        #: Answers put and not yet committed, by key, and when the first of them was put.
        self._pending: dict[str, str] = {}
        self._pending_since = 0.0
        #: Transactions that wrote answers, for the record and the tests.
        self.commits = 0
        self._closed = False
        atexit.register(self.close)

    def _open(self, path: Path) -> sqlite3.Connection:
        """The cache's connection: for writing, or, where this process cannot write the file or
        its folder, for reading only (said in one line). A read-only cache is never taken for a
        damaged one: SQLite's "readonly" and "cannot open" are no damage, and it is never set aside."""
        why = _not_writable(path)
        if why is None:
            try:
                return self._connect(path)
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorname", "") not in ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM") \
                        and "readonly" not in str(exc):
                    raise
                why = f"SQLite: {exc}"
        self.read_only = True
        if not path.is_file():
            print(f"response cache {path}: cannot be created ({why}); this run's answers are kept in memory only, "
                  "not saved", flush=True)
            db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)")
            return db
        db = self._connect_read_only(path)
        print(f"response cache {path}: read-only ({why}); its answers are read, new answers are not saved", flush=True)
        return db

    @staticmethod
    def _connect_read_only(path: Path) -> sqlite3.Connection:
        """``path`` opened for reading, checked as :meth:`_connect` checks it. A cache in WAL mode
        in a folder this process cannot write is opened as immutable (SQLite cannot make its
        shared-memory file there)."""
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        last: sqlite3.Error | None = None
        for tail in ("", "&immutable=1"):
            try:
                db = sqlite3.connect(uri + tail, uri=True, timeout=60, check_same_thread=False, isolation_level=None)
            except sqlite3.Error as exc:
                last = exc
                continue
            try:
                found = db.execute("PRAGMA quick_check").fetchone()
                db.execute("SELECT 1 FROM answers LIMIT 1").fetchall()
            except sqlite3.OperationalError as exc:
                db.close()
                if "no such table" in str(exc):
                    raise sqlite3.DatabaseError("not a response cache (no answers table)") from exc
                last = exc
                continue
            except BaseException:
                db.close()
                raise
            if found is None or found[0] != "ok":
                db.close()
                said = " ".join(str(found[0]).split("\n")[:2]) if found else "no answer"
                raise sqlite3.DatabaseError(f"its check found: {said}")
            return db
        assert last is not None
        raise last

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
            text = self._pending.get(key)
            if text is None:
                row = self._db.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
                text = None if row is None else row[0]
        if text is None:
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not an answer object")
            return Answer.of(data)
        except (ValueError, TypeError):
            if not self._said_unreadable:
                self._said_unreadable = True
                print(f"response cache {self.path}: a row cannot be read (not an answer); its request is asked again", flush=True)
            return None

    def put(self, key: str, answer: Answer) -> None:
        """Keep ``answer``: in the open batch, committed with it (see the module)."""
        text = json.dumps(answer.as_json())
        with self._lock:
            now = time.monotonic()
            if not self._pending:
                self._pending_since = now
            self._pending[key] = text
            if len(self._pending) >= self.batch_rows or now - self._pending_since >= self.batch_seconds:
                self._commit()

    def flush(self) -> None:
        """Commit the open batch now."""
        with self._lock:
            self._commit()

    def _commit(self) -> None:
        """One transaction for every pending answer (the lock held); on an error nothing of the
        batch is written and it stays pending."""
        if not self._pending or self._closed or self.read_only:
            return  # (read-only: the answers stay pending, answered from memory by ``get``)
        rows = list(self._pending.items())
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR REPLACE INTO answers (key, answer) VALUES (?, ?)", rows)
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._pending.clear()
        self.commits += 1

    def close(self) -> None:
        """Commit the open batch and close the file; a second close does nothing."""
        with self._lock:
            if self._closed:
                return
            try:
                self._commit()
            finally:
                self._closed = True
                self._db.close()
                atexit.unregister(self.close)
