"""One HTTP exchange with a server: a JSON body posted, the whole answer read, within one deadline.

Why the standard library's ``http.client`` and not httpx or the openai SDK (which is httpx
underneath): what a served card needs from its transport is a bound on the *whole* exchange and a
way to abandon it, and neither library gives those with less code.

- **One deadline, connection to last byte.** httpx's ``Timeout`` bounds each phase (connect, each
  read, each write), so a server trickling one byte a second never reaches it. Here a timer shuts
  the socket down when ``timeout`` seconds have passed since the exchange began, whatever it is
  doing: connecting, sending, waiting for the status line, or reading the body.
- **Abandoned at once on a stop.** The same shutdown, applied to every exchange in flight
  (:meth:`InFlight.abort`), ends them when the card is stopped (SIGTERM, Ctrl-C) instead of
  waiting for their answers.
- **No redirects.** ``http.client`` follows none: a 3xx is an error naming where it points
  (:class:`Refused`), so the ``Authorization`` header never goes to another host. An API root that
  redirects is given as its final address instead.
- **Few failures, all known.** A refused or dropped connection, a body shorter than its
  Content-Length (``IncompleteRead``), a garbage status line (``BadStatusLine``) and a timeout are
  :class:`Transient` (worth retrying); any other status than 200 is :class:`Refused`, with its
  ``Retry-After`` read in both forms (seconds, or an HTTP date).

Proxies from ``HTTP_PROXY``/``HTTPS_PROXY`` (and ``NO_PROXY``) are honoured as urllib honours
them: an ``http://`` request goes to the proxy with its absolute URL, an ``https://`` one through
a ``CONNECT`` tunnel.
"""

from __future__ import annotations

import email.utils
import http.client
import socket
import threading
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit


class Transient(Exception):
    """No complete answer (timeout, refused or dropped connection, cut or garbled answer)."""


class Aborted(Exception):
    """The exchange was abandoned because the card is stopping."""


@dataclass
class Reply:
    status: int
    reason: str
    body: bytes
    retry_after: str | None = None
    location: str | None = None


class _Exchange:
    """One exchange's connection, and its socket once connected: kept apart because http.client
    hands the socket to the response and drops it from the connection (an answer that closes the
    connection), while the body is still being read from it."""

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self.sock: socket.socket | None = None

    def shut(self) -> None:
        """End the socket under whatever thread is blocked on it: its read returns at once."""
        sock = self.sock or self.conn.sock
        if sock is not None:
            try:
                # socket.socket's own shutdown, also on an SSL socket (whose override would drop
                # the TLS state under the reading thread): the blocked read sees the end of the stream.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass


class InFlight:
    """The exchanges in flight, so that a stop shuts them all at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[_Exchange] = set()
        self.aborted = False

    def add(self, exchange: _Exchange) -> None:
        with self._lock:
            if self.aborted:
                raise Aborted()
            self._open.add(exchange)

    def discard(self, exchange: _Exchange) -> None:
        with self._lock:
            self._open.discard(exchange)

    def abort(self) -> None:
        """Shut every open exchange down, and refuse new ones (until :meth:`reset`)."""
        with self._lock:
            self.aborted = True
            for exchange in self._open:
                exchange.shut()

    def reset(self) -> None:
        with self._lock:
            self.aborted = False


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """The connection for ``url`` (through a proxy where the environment names one) and the
    request target to send on it."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    host, port = parts.hostname or "", parts.port
    proxy = None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get(parts.scheme)
    if proxy:
        p = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        if https:
            conn = http.client.HTTPSConnection(p.hostname or "", p.port or 80, timeout=timeout)
            conn.set_tunnel(host, port or 443)
            return conn, target
        return http.client.HTTPConnection(p.hostname or "", p.port or 80, timeout=timeout), url
    cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
    return cls(host, port, timeout=timeout), target


def post(url: str, body: bytes, headers: dict[str, str], timeout: float, inflight: InFlight) -> Reply:
    """POST ``body`` to ``url`` and read the whole answer within ``timeout`` seconds.

    Raises :class:`Transient` (no complete answer) or :class:`Aborted` (the card is stopping)."""
    conn, target = _connection(url, timeout)
    exchange = _Exchange(conn)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        exchange.shut()

    inflight.add(exchange)
    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    started = time.monotonic()
    try:
        conn.connect()
        exchange.sock = conn.sock
        if expired.is_set():  # the timer fired while connecting, before there was a socket to shut
            raise TimeoutError()
        conn.request("POST", target, body=body, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        reply = Reply(response.status, response.reason, payload, response.getheader("Retry-After"), response.getheader("Location"))
    except (http.client.HTTPException, OSError, ValueError) as exc:
        if inflight.aborted:
            raise Aborted() from exc
        if expired.is_set() or isinstance(exc, (TimeoutError, socket.timeout)):
            raise Transient(f"no complete answer within {timeout:g} s") from exc
        raise Transient(describe(exc)) from exc
    finally:
        timer.cancel()
        inflight.discard(exchange)
        conn.close()
        if exchange.sock is not None:
            exchange.sock.close()
    if expired.is_set() or time.monotonic() - started > timeout:
        # Read to the end as the timer fired: a race the deadline still decides.
        raise Transient(f"no complete answer within {timeout:g} s")
    return reply


def describe(exc: BaseException) -> str:
    """What went wrong, in words (the exception's class says which fault it was)."""
    if isinstance(exc, http.client.IncompleteRead):
        return f"the answer was cut off ({len(exc.partial)} bytes read, {exc.expected} more expected)"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, http.client.BadStatusLine):
        return "the server's answer has no valid HTTP status line"
    if isinstance(exc, http.client.HTTPException):
        return f"a malformed HTTP answer ({type(exc).__name__})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return f"connection failed ({exc.strerror or exc})" if isinstance(exc, OSError) else str(exc)


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds, or an HTTP date (RFC
    9110, 10.2.3); None when absent or unreadable. Never negative."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)
