"""What every test server on 127.0.0.1 shares: a threaded HTTP server on a free port, its base URL,
and starting and stopping it as a context manager. The stand-ins (served_standin.py,
scripted_server.py) differ only in their request handler."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonReplies(BaseHTTPRequestHandler):
    """A request handler's one way to answer: a JSON body (or raw bytes) with its status and headers."""

    def send(self, status: int, data, headers: dict | None = None) -> None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)


class LocalServer:
    def _listen(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
